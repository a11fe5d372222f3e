"""whitesky.cloud emulator for whitesky.capvco's demo and tests."""
