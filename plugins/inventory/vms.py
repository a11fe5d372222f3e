# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: vms
short_description: The VMs of a whitesky.cloud customer, grouped by cluster, pool and GPU type
version_added: 0.1.0
author:
  - whitesky.capvco contributors (@whitesky)
description:
  - A host per VM of the customer's cloudspaces, read from the whitesky.cloud portal API.
  - Each VM is in the groups C(cluster_<cluster>) and C(pool_<pool>) of the cluster that owns it, told by the
    ownership marker in its description (C(capvco/v1 cluster=<cluster> pool=<pool>), written when the collection
    creates the VM), or else in C(unowned); and in a C(gpu_<type>) group per GPU type of its vGPU reservations
    (the profile's vendor and model in lower case, for example C(gpu_nvidia_a100)). Group names are made safe as
    Ansible makes them (C(cluster_web-gpu) is C(cluster_web_gpu)).
  - Host variables are prefixed with C(whitesky_) (see the examples for each).
  - A cluster's pools are also read from the pools note its runs keep on its cloudspace (title C(capvco/v1),
    content C(pools cluster=<cluster> <pool>:<replicas>:<vcpus>:<memory>:<gpu count>:<gpu type>[:<disk>];...)), so
    that a pool scaled to zero, which has no VM, still shows - its group C(pool_<pool>) (empty at zero) has the
    variables C(capvco_pool_replicas), C(capvco_pool_gpu) (C(type) and C(count), or null),
    C(capvco_pool_per_machine_hourly) (what one machine of it costs per hour, whole, at the location's prices - its
    vCPUs, memory, boot disk and vGPUs, as the cluster's plan prices it; null when a unit's price is not known, or
    the note records no disk), C(capvco_pool_disk) (GiB of each machine's boot disk; null when the note has none),
    C(capvco_pool_currency), C(capvco_pool_cluster), C(capvco_pool_vcpus), C(capvco_pool_memory),
    C(capvco_pool_cloudspace), C(capvco_pool_cloudspace_id) and C(capvco_pool_location), when one pool of the
    inventory has that name (two clusters' C(cp), for example, leave C(pool_cp) without them); the group
    C(cluster_<cluster>) has C(capvco_pools), the list of all of the cluster's pools with the same keys. Only
    the notes of clusters that the cloudspace's creator and member notes name are read; a note that does not parse
    whole is left out with a warning. The note is information, never proof of ownership. C(ansible-inventory
    --list --export) (what AWX imports) and C(--graph --vars) show group variables.
  - The calls are the listings and what ownership needs, never one per VM of others. A VM's marker is read
    (C(getVirtualMachineInfo)) only when its name starts with the name and C(-) of a cluster that its cloudspace's
    notes name; every other VM is C(unowned) without a read.
  - Uses a YAML configuration file whose name ends with C(.whitesky.yml) or C(.whitesky.yaml) (or is
    C(whitesky.yml)).
extends_documentation_fragment:
  - constructed
  - inventory_cache
requirements:
  - httpx >= 0.24
options:
  plugin:
    description: The name of this plugin; it marks the file as this plugin's.
    required: true
    type: str
    choices: [whitesky.capvco.vms]
  api_url:
    description:
      - Base URL of the whitesky.cloud portal API, for example C(https://portal.example.com/api/1).
      - C(/api/1) is appended when missing.
      - Required, from this option or else the E(WHITESKY_API_URL) environment variable.
    type: str
    env:
      - name: WHITESKY_API_URL
  api_token:
    description:
      - The bearer token (a JWT) used in the C(Authorization) header.
      - It is never printed, in host variables, warnings or errors (at any verbosity). Give it in the environment
        (the AWX credential type of the collection injects it) or from a vault, rather than in the file.
      - Required, from this option or else the E(WHITESKY_API_TOKEN) environment variable.
    type: str
    env:
      - name: WHITESKY_API_TOKEN
  customer_id:
    description:
      - The customer (account) whose cloudspaces are read.
      - Required, from this option or else the E(WHITESKY_CUSTOMER_ID) environment variable.
    type: str
    env:
      - name: WHITESKY_CUSTOMER_ID
  validate_certs:
    description: Whether to verify the portal's TLS certificate.
    type: bool
    default: true
    env:
      - name: WHITESKY_VALIDATE_CERTS
  timeout:
    description:
      - Timeout in seconds of each HTTP request; each call, with its retries, ends at the latest O(timeout) plus
        a retry budget of 30 seconds after it started.
    type: float
    default: 30.0
    env:
      - name: WHITESKY_TIMEOUT
  locations:
    description:
      - Only the cloudspaces in these locations.
      - Default, every location the customer's cloudspaces are in.
    type: list
    elements: str
    default: []
  cloudspaces:
    description:
      - Only the cloudspaces of these names.
      - Default, every cloudspace of the customer (in O(locations)).
    type: list
    elements: str
    default: []
  parallel:
    description:
      - How many platform reads are in flight at once, at most (the listings, the notes, the reservations' pages
        and the markers; each waits only on what it needs).
    type: int
    default: 64
  hostnames:
    description:
      - What names a host, in order of preference; the first that gives a value names the host.
      - V(name), the VM's name; V(private_ip), its first address on the cloudspace's network; V(external_ip),
        the address of its first NIC on an external network.
      - A VM for which none gives a value is left out, with a warning; so is a VM whose name another host already
        has (the hosts are taken by location, cloudspace and VM name), and one whose name is a group's (V(all),
        V(ungrouped), V(unowned), a cluster's, pool's or GPU type's group) or the controller's (V(localhost)).
    type: list
    elements: str
    choices: [name, private_ip, external_ip]
    default: [name]
notes:
  - O(cache=true) keeps what was read (not the token) for O(cache_timeout) seconds; a run that finds it makes no
    call to the platform. The entry is read again when O(api_url), O(customer_id), O(locations) or
    O(cloudspaces) changed, and with C(--flush-cache).
  - The cache keeps the VMs as read; O(hostnames), O(compose), O(groups) and O(keyed_groups) apply to it on each run.
"""

EXAMPLES = r"""
# demo.whitesky.yml, every VM, the connection from WHITESKY_API_URL, WHITESKY_API_TOKEN, WHITESKY_CUSTOMER_ID, is
# the one line "plugin: whitesky.capvco.vms".
#
# One location's GPU cluster, hosts named by their external address when they have one, connected to it
plugin: whitesky.capvco.vms
locations: [be-gen-1]
cloudspaces: [web]
hostnames: [external_ip, name]
compose:
  ansible_host: (whitesky_external_ips + whitesky_private_ips + [inventory_hostname]) | first
keyed_groups:
  - key: whitesky_location
    prefix: location
  - key: whitesky_status | lower
    prefix: status
groups:
  costly: whitesky_cost_per_hour > 2
cache: true
cache_plugin: ansible.builtin.jsonfile
cache_connection: ~/.cache/whitesky-inventory
cache_timeout: 300

# The host variables of a GPU machine of cluster web:
#   whitesky_vm_id: 1042
#   whitesky_name: web-gpu-0
#   whitesky_cloudspace_id: cs-5f2a
#   whitesky_cloudspace: web
#   whitesky_location: be-gen-1
#   whitesky_status: RUNNING
#   whitesky_vcpus: 4
#   whitesky_memory: 8192
#   whitesky_storage: 10                  # GiB of its boot disk
#   whitesky_private_ips: [192.168.103.12]
#   whitesky_external_ips: [198.51.100.7]
#   whitesky_cluster: web                 # null for a VM no cluster owns (group unowned)
#   whitesky_pool: gpu
#   whitesky_vgpus:
#     - vgpu_id: 7c0e...
#       name: capvco.web.web-gpu-0.00.0tj8k2w
#       owner: {cluster: web, machine: web-gpu-0, slot: 0, created: 1767225600}   # null: a name not ours
#       profile: nvidia-a100-40c
#       type: NVIDIA A100
#       status: ATTACHED
#       cost_per_hour: 1.0                # one vGPU-hour at the location's vgu price
#   whitesky_cost_per_hour: 1.105479      # the whole VM per hour: vCPUs, memory, boot disk and vGPUs
#   whitesky_cost_by_unit: {vcu: 0.065753, mu: 0.038356, su: 0.00137, vgu: 1.0}   # null: that unit's price unknown
#   whitesky_currency: EUR
# Its groups: cluster_web, pool_gpu, gpu_nvidia_a100
#
# The variables of group pool_gpu, from web's pools note, once the pool is scaled to zero (no host in it):
#   capvco_pool_cluster: web
#   capvco_pool_replicas: 0
#   capvco_pool_vcpus: 4
#   capvco_pool_memory: 8192
#   capvco_pool_disk: 10
#   capvco_pool_gpu: {type: NVIDIA A100, count: 2}
#   capvco_pool_per_machine_hourly: 2.105479  # what one machine of it would cost per hour, whole, scaled up
#   capvco_pool_currency: EUR
#   capvco_pool_cloudspace: web
#   capvco_pool_cloudspace_id: cs-5f2a
#   capvco_pool_location: be-gen-1
# and group cluster_web has capvco_pools, the list of its pools (each with name and the same keys but cluster).
"""

# the documentation comes before the imports (ansible-doc reads it without importing)
import os  # noqa: E402
import re  # noqa: E402

from ansible import constants as C  # noqa: E402
from ansible.errors import AnsibleError, AnsibleParserError  # noqa: E402
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable  # noqa: E402
from ansible.release import __version__ as ansible_version  # noqa: E402
from ansible.utils.unsafe_proxy import wrap_var  # noqa: E402

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import (  # noqa: E402
    inventory_cache,
    inventory_hosts,
    vm_inventory,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.connection import (  # noqa: E402
    OPTIONS,
    Connection,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import WhiteskyError  # noqa: E402
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub  # noqa: E402

#: The longest message of an error or a warning.
MESSAGE_LIMIT = 4096
#: Before ansible-core 2.19 a string an inventory plugin sets is a template unless it is wrapped as unsafe; from 2.19
#: on only a string marked as trusted is, and what a plugin sets never is (wrapping would only cost time).
WRAP = tuple(int(p) for p in re.findall(r"\d+", ansible_version)[:2]) < (2, 19)


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):
    """The inventory plugin: options and cache here; the reading in ``module_utils/faces/vm_inventory.py``, a host's
    name, groups and variables in ``inventory_hosts.py``, what the cache keeps in ``inventory_cache.py``."""

    NAME = "whitesky.capvco.vms"

    def __init__(self):
        super().__init__()
        self._secret = ""  # the token, once known: cut out of every message

    def verify_file(self, path):
        if not super().verify_file(path):
            return False
        base = os.path.basename(path)
        return base in ("whitesky.yml", "whitesky.yaml") or base.endswith((".whitesky.yml", ".whitesky.yaml"))

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        self._check_hostnames()
        try:
            conn = self._connection()
            key = inventory_cache.fingerprint(
                conn.api_url, conn.customer_id, self.get_option("locations"), self.get_option("cloudspaces")
            )
            got = self._cached(path, key) if cache and self.get_option("cache") else None
            if got is None:
                got = self._read(conn)
                if self.get_option("cache"):
                    self._cache[self.get_cache_key(path)] = inventory_cache.to_cache(got, key)
        except WhiteskyError as exc:
            raise AnsibleParserError(self._clean(exc)) from None
        for warning in got.warnings:
            self.display.warning(self._clean(warning))
        self._populate(got.hosts, got.pools)

    def _clean(self, text):
        """A message as it may be shown: without the token, controls escaped, cut."""
        return scrub(text, MESSAGE_LIMIT, secrets=(self._secret,))

    def _connection(self):
        """The connection (``connection.OPTIONS``), its options templated (with the extra vars); a missing one fails
        naming its variable (Ansible read the variables already)."""
        self.templar.available_variables = self._vars
        options = {}
        for option in OPTIONS:
            value = self.get_option(option.name)
            if isinstance(value, str) and self.templar.is_template(value):
                value = self.templar.template(value)
                value = str(value) if value is not None and option.type == "str" else value
            options[option.name] = value
        self._secret = str(options["api_token"] or "").strip()  # cut out of every message from now on
        return Connection.from_options(options, where=" in %s" % self.NAME)

    def _check_hostnames(self):
        unknown = [str(h) for h in self.get_option("hostnames") if h not in inventory_hosts.HOSTNAME_SOURCES]
        if unknown:
            raise AnsibleParserError(
                "hostnames: unknown %s; use %s" % (", ".join(unknown), ", ".join(inventory_hosts.HOSTNAME_SOURCES))
            )

    def _cached(self, path, key):
        try:
            entry = self._cache[self.get_cache_key(path)]
        except KeyError:
            return None
        return inventory_cache.from_cache(entry, key)

    def _read(self, conn):
        # the client (and httpx) is imported only when the platform is read: a run that finds its cache needs neither
        from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
        from ansible_collections.whitesky.capvco.plugins.module_utils.platform.transport import HTTPX_IMPORT_ERROR

        if HTTPX_IMPORT_ERROR:
            raise AnsibleParserError("%s needs the Python library httpx (pip install httpx)" % self.NAME)
        with WhiteskyClient.connect(conn) as client:
            for warning in client.transport.warnings:
                self.display.warning(self._clean(warning))
            return vm_inventory.read(
                client,
                self.get_option("locations"),
                self.get_option("cloudspaces"),
                parallel=max(1, self.get_option("parallel")),
            )

    def _sanitize_group_name(self, name):
        """Every group name this plugin makes (its own, ``keyed_groups``' and ``groups``') as letters, digits and
        ``_`` only, whatever TRANSFORM_INVALID_GROUP_CHARS says: a group name built from what the platform says
        (a VM's name, anyone's) is never a template, on any ansible-core."""
        return inventory_hosts.safe_group(str(name))

    def _data(self, value):
        """A value the platform (or the cache) gave, as Ansible must hold it: data, never a template."""
        return wrap_var(value) if WRAP else value

    def _populate_pools(self, pools):
        """The groups of the clusters' pools, from their pools notes: ``pool_<pool>`` (empty for a pool at zero)
        with the pool's variables when one pool of the inventory has that name, and ``cluster_<cluster>`` with
        ``capvco_pools``, all of the cluster's pools."""
        for group, found in inventory_hosts.pools_by_group(pools).items():
            self.inventory.add_group(self._sanitize_group_name(group))
            if len(found) == 1:
                for var, value in inventory_hosts.pool_vars(found[0]).items():
                    self.inventory.set_variable(self._sanitize_group_name(group), var, self._data(value))
        for group, values in inventory_hosts.cluster_vars(pools).items():
            self.inventory.add_group(self._sanitize_group_name(group))
            for var, value in values.items():
                self.inventory.set_variable(self._sanitize_group_name(group), var, self._data(value))

    def _populate(self, hosts, pools=()):
        order = self.get_option("hostnames")
        strict = self.get_option("strict")
        compose, groups, keyed = (self.get_option(o) for o in ("compose", "groups", "keyed_groups"))
        # a host may not take a group's name: Ansible would read it as that group (a loop, or a group added to
        # itself) and the whole source would fail to parse
        reserved = set(inventory_hosts.RESERVED_GROUPS) | set(self.inventory.groups)
        for host in hosts:
            reserved.update(inventory_hosts.groups(host))
        reserved.update(inventory_hosts.pools_by_group(pools))
        reserved.update(inventory_hosts.cluster_vars(pools))
        self._populate_pools(pools)
        taken = {}
        for host in hosts:
            name = inventory_hosts.hostname(host, order)
            what = "VM %r (id %s) of cloudspace %r" % (host["name"], host["vm_id"], host["cloudspace"])
            if name is None:
                self.display.warning(
                    self._clean("%s is left out: none of hostnames %s gives it a name" % (what, order))
                )
                continue
            if name in reserved or name in self.inventory.groups:
                self.display.warning(self._clean("%s is left out: %r is the name of a group" % (what, name)))
                continue
            if name in C.LOCALHOST:  # a host of that name would take the controller's place (plays on localhost)
                self.display.warning(self._clean("%s is left out: %r is the controller's name" % (what, name)))
                continue
            if name in taken:
                self.display.warning(self._clean("%s is left out: %s already names %s" % (what, name, taken[name])))
                continue
            taken[name] = what
            name = self._data(name)  # a VM's name is anyone's: inventory_hostname is data, never a template
            self.inventory.add_host(name)
            for group in inventory_hosts.groups(host):
                self.inventory.add_child(self.inventory.add_group(self._sanitize_group_name(group)), name)
            for var, value in inventory_hosts.host_vars(host).items():
                self.inventory.set_variable(name, var, self._data(value))
            if compose or groups or keyed:
                self._construct(name, compose, groups, keyed, strict)

    def _construct(self, name, compose, groups, keyed, strict):
        """``compose``, ``groups`` and ``keyed_groups`` for one host: what they compose from the platform's values
        is data too; a constructed group that would take a host's name is left out, with a warning."""
        hostvars = self.inventory.get_host(name).get_vars()
        self._set_composite_vars(compose, hostvars, name, strict=strict)
        for var in compose or {}:
            host = self.inventory.get_host(name)
            if var in host.vars:
                self.inventory.set_variable(name, var, self._data(host.vars[var]))
        hostvars = self.inventory.get_host(name).get_vars()
        inventory, left_out = self.inventory, set()
        add_group, add_child = inventory.add_group, inventory.add_child

        def guarded_group(group):  # Ansible would take a group named like a host for that host, and mix the two
            if group in inventory.hosts:
                left_out.add(group)
                return group
            return add_group(group)

        def guarded_child(group, child):
            return None if group in left_out else add_child(group, child)

        inventory.add_group, inventory.add_child = guarded_group, guarded_child
        try:
            self._add_host_to_composed_groups(groups, hostvars, name, strict=strict)
            self._add_host_to_keyed_groups(keyed, hostvars, name, strict=strict)
        except AnsibleError as exc:
            self.display.warning(self._clean("host %r: a constructed group is left out: %s" % (name, exc)))
        finally:
            del inventory.add_group, inventory.add_child  # the class's own again
        for group in sorted(left_out):
            self.display.warning(self._clean("group %r of host %r is left out: a host has that name" % (group, name)))
