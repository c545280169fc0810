"""A local emulator of the service, for tests and the demo."""
