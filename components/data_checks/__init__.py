"""Checks that stop bad data before Transform: schema anomalies, label drift between spans."""
