"""Child processes of the recovery crash test."""
