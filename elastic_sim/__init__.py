"""elastic_sim"""
