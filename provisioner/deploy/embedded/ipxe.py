"""iPXE scripts served per MAC (golden-file tested)."""

from __future__ import annotations

from netaddr import IPAddress, IPNetwork

from provisioner.exceptions import InputError

# no_timer_check: emulated hosts on a loaded machine can fail the kernel's IO-APIC timer check
CONSOLE = "console=tty0 console=ttyS0,115200n8 no_timer_check"


def _check_arg(name: str, value: str) -> str:
    # kernel arguments are space separated and iPXE expands ${...}: refuse what would break them
    if not value or any(c in value for c in " \t\n\"'${}"):
        raise InputError(f"{name} {value!r} cannot be passed on a kernel command line")
    return value


def chain_script(base_url: str) -> str:
    """The script every iPXE client gets first: chain to the script of its own MAC."""
    return (
        "#!ipxe\n"
        "# provisioner: hand over to the per-host script; a MAC we do not deploy gets a 404\n"
        f"chain {base_url}/ipxe/${{netX/mac:hexhyp}} || exit\n"
    )


def image_script(
    *,
    base_url: str,
    host: str,
    mac: str,
    address: IPAddress,
    network: IPNetwork,
    gateway: IPAddress | str | None,
    key: str,
) -> str:
    """Boot the deploy ramdisk with the parameters its init reads from the command line.

    ``key`` opens the host's one-time configuration: only this script, served only to the
    host's reserved address, carries it.
    """
    args = [
        f"initrd=initrd.img {CONSOLE}",
        f"deploy_host={_check_arg('host name', host)}",
        f"deploy_mac={_check_arg('MAC', mac.lower())}",
        f"deploy_ip={address}/{network.prefixlen}",
        f"deploy_server={_check_arg('server URL', base_url)}",
        f"deploy_key={_check_arg('boot key', key)}",
    ]
    if gateway is not None:
        args.append(f"deploy_gw={gateway}")
    return (
        "#!ipxe\n"
        f"# provisioner: image deploy of {host}\n"
        f"kernel {base_url}/files/ramdisk/vmlinuz {' '.join(args)}\n"
        f"initrd --name initrd.img {base_url}/files/ramdisk/initrd.img\n"
        "boot\n"
    )


def autoinstall_script(
    *,
    base_url: str,
    host: str,
    kernel_url: str,
    initrd_url: str,
    iso_url: str,
    key: str,
    extra_args: str = "",
) -> str:
    """Boot Ubuntu's netboot kernel with the host's NoCloud autoinstall data source.

    The data source URL holds ``key``: the installer data (with the callback token) is served
    only for it, only to the host's reserved address, and only until the installer reports.
    """
    seed = f"{base_url}/autoinstall/{_check_arg('host name', host)}/{_check_arg('key', key)}/"
    args = (
        f"initrd=initrd {CONSOLE} root=/dev/ram0 ramdisk_size=1500000 ip=dhcp "
        f"url={_check_arg('iso_url', iso_url)} autoinstall ds=nocloud-net;s={seed}"
    )
    if extra_args:
        args += " " + extra_args
    return (
        "#!ipxe\n"
        f"# provisioner: Ubuntu autoinstall of {host}\n"
        f"kernel {kernel_url} {args}\n"
        f"initrd --name initrd {initrd_url}\n"
        "boot\n"
    )


def local_boot_script(host: str) -> str:
    """After the install: leave iPXE so the firmware boots the next device, the disk."""
    return f"#!ipxe\n# provisioner: {host} is installed; boot from disk\nexit\n"
