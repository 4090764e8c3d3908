//! Pure tests of the turn machine: feed inputs, drain outputs, assert exact event sequences.
