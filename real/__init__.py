"""real"""
