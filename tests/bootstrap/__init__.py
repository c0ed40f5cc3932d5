"""Tests of bootstrap/: the node scripts, the head's daemons, local clusters."""
