"""What a grade is made of, and nothing that runs: labs and their lab.toml (labs), the versioned
result model of results.json (results), which hidden tests a student may see (hidden), why a lab or a
binary does not run (block), the similarity report's findings, errors, text helpers and progress lines."""
