"""HttpPlacement built from nova.conf's [placement] section, the way a nova
deployment configures it (here with keystoneauth's admin_token plugin)."""

import pytest
from oslo_config import cfg

from scheduler_ext import conf as se_conf
from scheduler_ext import errors
from scheduler_ext.placement.http import MICROVERSION, HttpPlacement


def _conf(tmp_path, text):
    path = tmp_path / "nova.conf"
    path.write_text(text)
    conf = cfg.ConfigOpts()
    se_conf.register_opts(conf)
    conf([], project="nova", default_config_files=[str(path)])
    return conf


def test_from_nova_conf_talks_to_placement(tmp_path, placement_url):
    conf = _conf(tmp_path, f"""
[placement]
auth_type = admin_token
endpoint = {placement_url}
token = admin
region_name = RegionOne
""")
    client = HttpPlacement.from_conf(conf)
    prov = client.create_provider("from-nova-conf")
    assert client.get_provider(prov.uuid).name == "from-nova-conf"
    assert client.microversion == MICROVERSION
    client.delete_provider(prov.uuid)


def test_wrong_endpoint_in_nova_conf_is_a_clear_error(tmp_path):
    conf = _conf(tmp_path, """
[placement]
auth_type = admin_token
endpoint = http://127.0.0.1:9
token = admin
""")
    with pytest.raises(errors.PlacementUnavailable, match="127.0.0.1:9"):
        HttpPlacement.from_conf(conf).list_providers()
