//! The `ccbench` command: the built-in scenarios and the whole command line.

ccbench::main!();
