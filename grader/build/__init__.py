"""CMake builds: the pristine tree and a staged submission's own build folder (cmake, submission),
compile_commands.json (compiledb), the targets of a lab (targets) and the build stages of a grade (stages)."""
