"""grade"""
