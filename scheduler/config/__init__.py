"""The scheduler's YAML configuration (`--config FILE`): its keys, parsed and checked, the plugin registry
and the objects built from it. May import every scheduler subpackage below the entry points (cli, standalone, extender)."""
