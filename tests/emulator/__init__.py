"""Tests of the local emulator of the Data Tables Service (a package, so module names never collide)."""
