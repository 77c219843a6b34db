"""This machine measured: `calibrate` writes its figures as a chip entry, `validate` times
ops against the roofline's lower bound."""
