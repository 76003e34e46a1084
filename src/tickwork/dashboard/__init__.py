"""The dashboard: static HTML, CSS and JavaScript that talk only to the REST API."""
