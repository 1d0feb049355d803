"""Generated from proto/ by scripts/generate_protos.py; do not edit."""
