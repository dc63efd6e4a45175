"""A real schema registry on loopback (Apicurio Registry) for the tests, the lab and the demo."""
