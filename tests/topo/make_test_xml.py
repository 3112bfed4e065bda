#!/usr/bin/env python3
"""Writes two_socket_4gpu.xml: the hwloc XML (format 2.0) of a made-up but
typical machine for the topology tests, not captured from hardware. Two
packages with one NUMA node each (4 cores x 2 threads, 64 GiB); on each
package a host bridge, a root port and a PCIe Gen5 switch holding two
NVIDIA H100 GPUs and one ConnectX-7 InfiniBand NIC (the HGX layout); an
NVMe drive on package 0 and an Ethernet NIC on package 1. Run it again
after changing it: python3 make_test_xml.py > two_socket_4gpu.xml"""

gp = [100]


def nid():
    gp[0] += 1
    return gp[0]


def mask(bits):
    v = 0
    for b in bits:
        v |= 1 << b
    return "0x%08x" % v


def cpu_attrs(pus, node):
    m, n = mask(pus), mask([node])
    return (f'cpuset="{m}" complete_cpuset="{m}" nodeset="{n}" complete_nodeset="{n}"')


def package(p):
    pus = list(range(8 * p, 8 * p + 8))
    out = [f'    <object type="Package" os_index="{p}" {cpu_attrs(pus, p)} gp_index="{nid()}">',
           '      <info name="CPUModel" value="Intel(R) Xeon(R) Platinum 8480+"/>',
           f'      <object type="NUMANode" os_index="{p}" {cpu_attrs(pus, p)} gp_index="{nid()}"'
           ' local_memory="68719476736">',
           '        <page_type size="4096" count="16777216"/>',
           '      </object>']
    for c in range(4):
        core_pus = pus[2 * c:2 * c + 2]
        out.append(f'      <object type="Core" os_index="{4 * p + c}" {cpu_attrs(core_pus, p)}'
                   f' gp_index="{nid()}">')
        for pu in core_pus:
            out.append(f'        <object type="PU" os_index="{pu}" {cpu_attrs([pu], p)}'
                       f' gp_index="{nid()}"/>')
        out.append('      </object>')
    return out


def pci(busid, ptype, speed, vendor, device, children=()):
    out = [f'<object type="PCIDev" gp_index="{nid()}" pci_busid="{busid}" pci_type="{ptype}"'
           f' pci_link_speed="{speed}">',
           f'  <info name="PCIVendor" value="{vendor}"/>',
           f'  <info name="PCIDevice" value="{device}"/>']
    for name, t in children:
        out.append(f'  <object type="OSDev" gp_index="{nid()}" name="{name}" osdev_type="{t}"/>')
    out.append('</object>')
    return out


def bridge(busid, rng, depth, inner, speed="63.015385"):
    head = (f'<object type="Bridge" gp_index="{nid()}" bridge_type="1-1" depth="{depth}"'
            f' bridge_pci="{rng}" pci_busid="{busid}"'
            f' pci_type="0604 [8086:352a] [0000:0000] 04 00" pci_link_speed="{speed}">')
    return [head] + ['  ' + l for l in inner] + ['</object>']


GPU = ("0302 [10de:2330] [10de:16c1] a1 00", "63.015385", "NVIDIA Corporation",
       "GH100 [H100 SXM5 80GB]")
IB = "0207 [15b3:1021] [15b3:0041] 00 00", "50.412308", "Mellanox Technologies", \
     "MT2910 Family [ConnectX-7]"


def switch(base, dom_lo, gpus, nic, nicnames):
    b = base
    ports = []
    for i, g in enumerate(gpus):
        ports += bridge(f"0000:{b + 1:02x}:{i:02x}.0", f"0000:[{g:02x}-{g:02x}]", 3,
                        pci(f"0000:{g:02x}:00.0", *GPU, children=[(f"card{g}", 1)]))
    ports += bridge(f"0000:{b + 1:02x}:{len(gpus):02x}.0", f"0000:[{nic:02x}-{nic:02x}]", 3,
                    pci(f"0000:{nic:02x}:00.0", *IB, children=nicnames))
    up = bridge(f"0000:{b:02x}:00.0", f"0000:[{b + 1:02x}-{nic:02x}]", 2, ports)
    return bridge(f"0000:{dom_lo:02x}:01.0", f"0000:[{b:02x}-{nic:02x}]", 1, up)


def host_bridge(rng, inner):
    return ([f'<object type="Bridge" gp_index="{nid()}" bridge_type="0-1" depth="0"'
             f' bridge_pci="{rng}">'] + ['  ' + l for l in inner] + ['</object>'])


def main():
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
             '<topology version="2.0">',
             f'  <object type="Machine" os_index="0" cpuset="0x0000ffff"'
             ' complete_cpuset="0x0000ffff" allowed_cpuset="0x0000ffff" nodeset="0x00000003"'
             ' complete_nodeset="0x00000003" allowed_nodeset="0x00000003" gp_index="1">',
             '    <info name="HostName" value="hgx-test"/>']
    p0 = package(0)
    io0 = host_bridge("0000:[00-1f]",
                      switch(0x10, 0x00, [0x12, 0x13], 0x14, [("mlx5_0", 3), ("ib0", 2)]) +
                      bridge("0000:00:02.0", "0000:[1a-1a]", 1,
                             pci("0000:1a:00.0", "0108 [144d:a80a] [144d:a812] 00 00",
                                 "7.876923", "Samsung Electronics Co Ltd",
                                 "NVMe SSD Controller PM9A1", children=[("nvme0n1", 0)]),
                             speed="7.876923"))
    lines += p0 + ['      ' + l for l in io0] + ['    </object>']
    p1 = package(1)
    io1 = host_bridge("0000:[80-9f]",
                      switch(0x90, 0x80, [0x92, 0x93], 0x94, [("mlx5_1", 3), ("ib1", 2)]) +
                      bridge("0000:80:03.0", "0000:[9a-9a]", 1,
                             pci("0000:9a:00.0", "0200 [8086:1593] [8086:0005] 02 00",
                                 "7.876923", "Intel Corporation",
                                 "Ethernet Controller E810-C", children=[("eth0", 2)]),
                             speed="7.876923"))
    lines += p1 + ['      ' + l for l in io1] + ['    </object>']
    lines += ['  </object>', '</topology>']
    print("\n".join(lines))


main()
