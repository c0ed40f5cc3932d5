"""Tests of model/: the config model, the node plan, labels, prices, sync filters."""
