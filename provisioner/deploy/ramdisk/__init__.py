"""The deploy ramdisk (Debian kernel + busybox initramfs + deploy script), built and cached."""

from provisioner.deploy.ramdisk.builder import FILES, Ramdisk, build_ramdisk

__all__ = ["FILES", "Ramdisk", "build_ramdisk"]
