"""Generated protobuf code for toyshop.proto (see the header of toyshop.proto to regenerate)."""
