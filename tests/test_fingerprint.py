from labkit.fingerprint import fingerprint


def test_fingerprint_describes_machine_and_load():
    fp = fingerprint()
    for key in ("cpu_model", "cores_logical", "cores_usable", "caches", "memory_total_bytes", "os", "python",
                "packages", "git_commit", "load_average", "memory_available_bytes", "cpu_governor"):
        assert key in fp
    assert fp["cores_logical"] >= 1 and fp["memory_total_bytes"] > 0
    assert "numpy" in fp["packages"] and fp["python"].startswith("3.")
