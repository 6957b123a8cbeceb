//! Helpers shared by fp's privileged system tests (see tests/kernel).
