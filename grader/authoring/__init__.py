"""authoring"""
