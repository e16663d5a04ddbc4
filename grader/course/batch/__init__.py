"""course.batch"""
