# Submissions (uploaded agents and traces) live here; see DESIGN.md.
