"""BMC control: power, boot and virtual media interfaces, and their Redfish implementation."""
