"""Writing outputs (re-exported from :mod:`tileplan.files`, which lower layers use too)."""

from tileplan.files import (
    check_distinct,
    check_output_file,
    check_output_folder,
    make_output_folder,
    write_bytes_atomic,
    write_text_atomic,
)

__all__ = ["check_distinct", "check_output_file", "check_output_folder", "make_output_folder", "write_bytes_atomic",
           "write_text_atomic"]
