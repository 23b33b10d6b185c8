"""grader"""
