"""TV1–TV3, TV5, TV9 (buffer time), TV10 (reordering, PDV/IPDV) and the calculators."""
import pytest

from nfvperf import units

TV1 = {
    64: (14_880_952.38, 37_202_380.95, 59_523_809.52, 148_809_523.81),
    128: (8_445_945.95, 21_114_864.86, 33_783_783.78, 84_459_459.46),
    256: (4_528_985.51, 11_322_463.77, 18_115_942.03, 45_289_855.07),
    512: (2_349_624.06, 5_874_060.15, 9_398_496.24, 23_496_240.60),
    1024: (1_197_318.01, 2_993_295.02, 4_789_272.03, 11_973_180.08),
    1280: (961_538.46, 2_403_846.15, 3_846_153.85, 9_615_384.62),
    1518: (812_743.82, 2_031_859.56, 3_250_975.29, 8_127_438.23),
    9000: (138_580.93, 346_452.33, 554_323.73, 1_385_809.31),
}


@pytest.mark.parametrize("size", sorted(TV1))
def test_tv1_max_fps_table(size):
    for speed, want in zip((10e9, 25e9, 40e9, 100e9), TV1[size]):
        assert round(units.max_fps(size, speed), 2) == want
    # 1 GbE = 10 GbE / 10
    assert units.max_fps(size, 1e9) == pytest.approx(units.max_fps(size, 10e9) / 10)


def test_tv1_fractional_and_rfc5180_truncation():
    assert int(units.max_fps(128)) == 8_445_945          # RFC 5180 App. A truncates
    assert units.max_fps(128) != int(units.max_fps(128))  # we keep fractions
    table = units.line_rate_table()
    assert table[0]["size_b"] == 64 and round(table[0]["10g_fps"], 2) == 14_880_952.38


def test_tv2_layers():
    line = units.max_fps(64)
    assert units.l1_bps(line, 64) / 1e6 == pytest.approx(10_000.0)
    assert units.pct_line_rate(line, 64) == pytest.approx(100.0)
    assert round(units.l2_bps(line, 64) / 1e6, 2) == 7_619.05
    assert units.l1_bps(5e6, 64) / 1e6 == pytest.approx(3_360.0)
    assert units.pct_line_rate(5e6, 64) == pytest.approx(33.6)
    assert units.l2_bps(5e6, 64) / 1e6 == pytest.approx(2_560.0)
    assert units.ipv4_bps(5e6, 64) / 1e6 == pytest.approx(1_840.0)
    s = units.rate_summary(5e6, 64)
    assert s["l1_pct"] == pytest.approx(33.6) and s["ipv4_mbps"] == pytest.approx(1840.0)
    assert "L1" in units.fmt_rate(5e6, 64) and "L2" in units.fmt_rate(5e6, 64)


def test_tv3_vxlan():
    assert units.vxlan_outer_size_b(64) == 114
    assert round(units.vxlan_max_fps(64), 2) == 9_328_358.21
    assert units.vxlan_outer_size_b(1518) == 1568
    assert round(units.vxlan_max_fps(1518), 2) == 787_153.65
    assert units.vxlan_outer_size_b(64, ip_version=6) == 134
    assert units.vxlan_outer_size_b(64, outer_vlan=True) == 118
    assert units.vxlan_outer_size_b(64, ip_version=6, outer_vlan=True) == 138
    with pytest.raises(ValueError):
        units.vxlan_outer_size_b(64, ip_version=5)


def test_tv5_wall_time():
    assert 11 * units.rfc2544_trial_wall_s(60) == 759
    assert 11 * units.rfc2544_trial_wall_s(60, router=True) == 759 + 22


def test_tv9_buffer_time():
    assert units.implied_buffer_time_s(8, 1000) == pytest.approx(0.008)
    assert units.corrected_buffer_time_s(8, 1000, 750) == pytest.approx(0.002)
    mx = units.max_fps(64)
    assert round(units.implied_buffer_time_s(100_000, mx) * 1e3, 3) == 6.720
    assert round(units.corrected_buffer_time_s(100_000, mx, 8e6) * 1e3, 3) == 3.107


def test_tv10_reordering():
    r = units.reorder_stats([1, 2, 4, 5, 3, 6])
    assert r["reordered"] == 1 and r["extent_max"] == 2
    assert round(r["ratio_pct"], 2) == 16.67
    # duplicates count once; loss is not reordering
    assert units.reorder_stats([1, 2, 2, 3, 5])["reordered"] == 0


def test_tv10_pdv_ipdv():
    d = [10, 12, 11, 15, 10]
    assert units.ipdv_series(d) == [2, -1, 4, -5]
    assert units.pdv_series(d) == [0, 2, 1, 5, 0]
    assert units.percentile([1, 2, 3, 4], 50) == 2 and units.percentile([], 99) == 0.0


def test_dpdk_socket_memory_seed003():
    assert units.dpdk_port_mempool_bytes(9000) == 2_625_634_304
    assert 4 * units.dpdk_port_mempool_bytes(9000) + 512 * 2**20 == 11_039_408_128
    assert units.dpdk_socket_memory_mb([9000] * 4) == 11_264
    assert units.dpdk_socket_memory_mb([]) == 1024
    assert units.dpdk_socket_mem([[9000] * 4, [9000] * 4]) == "11264,11264"
    assert units.dpdk_socket_mem([[9000] * 4, []]) == "11264,1024"
    # MTU 1500: (2048 + 800) × 262144 B = 712 MB, + 512 MB = 1224 MB -> 2048 MB
    assert units.dpdk_socket_memory_mb([1500]) == 2048
    with pytest.raises(ValueError):
        units.dpdk_port_mempool_bytes(0)


def test_pmd_cpu_mask_seed000():
    assert units.pmd_cpu_mask([2]) == "4"
    assert units.pmd_cpu_mask([2, 20]) == "100004"
    assert units.pmd_cpu_mask("2-5") == "3c"
    assert units.pmd_cpu_mask([2, 22]) == "400004"
    assert units.pmd_cpu_mask("2,3") == "c"
    assert units.cores_from_mask("100004") == [2, 20]
    assert units.parse_core_list("2,4-6, 20") == [2, 4, 5, 6, 20]
    with pytest.raises(ValueError):
        units.pmd_cpu_mask([])
    with pytest.raises(ValueError):
        units.parse_core_list("5-2")


def test_switching_operations_table_5_1():
    # PHY-OVS-PHY: 1 switching operation; PHY-VM-VM-PHY: 3
    assert units.switching_ops_pps(33_783_782, 1) == 33_783_782
    assert units.switching_ops_pps(5_345_806, 3) == pytest.approx(16_037_417, abs=2)
    with pytest.raises(ValueError):
        units.switching_ops_pps(1e6, 0)


def test_bad_inputs():
    with pytest.raises(ValueError):
        units.max_fps(0)
    with pytest.raises(ValueError):
        units.max_fps(64, 0)
