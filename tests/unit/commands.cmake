# filled in by the module's owner
