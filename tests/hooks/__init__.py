"""Tests of the hook, its HTTP plumbing and the provider registration (a package, so module names never collide)."""
