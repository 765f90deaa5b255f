"""Installer backends behind one interface: embedded (dnsmasq/iPXE/HTTP) and MAAS."""
