"""Test-only stand-in for LIBERO (github.com/Lifelong-Robot-Learning/LIBERO), same module layout and
signatures as the real package; the "simulator" is a point gripper that must reach a goal position."""
