"""isolate"""
