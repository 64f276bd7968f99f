"""cli.runs.partition_checks_cached: while a run executes, the instance's storage is asked once
whether the run's partition exists, not for every input and output of every step (#44)."""

from dagster import DagsterInstance

from cli.runs import partition_checks_cached, run_job_for_partition
from resources.catalog import Catalog


def _counting(instance) -> list:
    """Count the questions that reach the instance's event-log storage."""
    storage = instance.event_log_storage
    asked = []
    real = storage.has_dynamic_partition

    def has_dynamic_partition(partitions_def_name, partition_key):
        asked.append(partition_key)
        return real(partitions_def_name, partition_key)

    storage.has_dynamic_partition = has_dynamic_partition
    return asked


def test_a_yes_is_remembered_a_no_is_asked_again_and_the_instance_is_restored(tmp_path):
    with DagsterInstance.local_temp(tempdir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions("dbs", ["a"])
        asked = _counting(instance)
        with partition_checks_cached(instance):
            assert all(instance.has_dynamic_partition("dbs", "a") for _ in range(5))
            assert not instance.has_dynamic_partition("dbs", "b")
            instance.add_dynamic_partitions("dbs", ["b"])  # added while the run executes: seen
            assert instance.has_dynamic_partition("dbs", "b") and instance.has_dynamic_partition("dbs", "b")
            with partition_checks_cached(instance):  # a run inside a run keeps the outer cache working
                assert instance.has_dynamic_partition("dbs", "a")
            assert instance.has_dynamic_partition("dbs", "a")
        assert asked == ["a", "b", "b"]
        assert "has_dynamic_partition" not in vars(instance)  # the instance's own method again
        instance.delete_dynamic_partition("dbs", "a")
        assert not instance.has_dynamic_partition("dbs", "a")  # nothing remembered after the run


def test_a_run_asks_the_storage_about_its_partition_once(tmp_path, isolated_home, demo_db_path):
    Catalog().register(demo_db_path, "university")
    (tmp_path / "dh").mkdir()
    with DagsterInstance.local_temp(tempdir=str(tmp_path / "dh")) as instance:
        asked = _counting(instance)
        result = run_job_for_partition("seed_databases_job", "university", instance=instance)
        assert result.success
        assert asked == ["university"], asked  # 490 questions in a small ABISS run before


def test_runs_on_two_threads_ending_in_either_order_leave_the_instance_as_it_was(tmp_path):
    """Run A starts, run B starts on another thread, A ends, B ends: B keeps its cache while it
    runs, nothing either learnt outlives them, and the instance's own method is back."""
    import threading

    with DagsterInstance.local_temp(tempdir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions("dbs", ["a"])
        asked = _counting(instance)
        a_entered, b_entered, a_left = threading.Event(), threading.Event(), threading.Event()
        seen = {}

        def run_b():
            with partition_checks_cached(instance):
                b_entered.set()
                a_left.wait(60)
                seen["b"] = [instance.has_dynamic_partition("dbs", "a") for _ in range(3)]

        with partition_checks_cached(instance):
            a_entered.set()
            b = threading.Thread(target=run_b)
            b.start()
            assert b_entered.wait(60)
            assert instance.has_dynamic_partition("dbs", "a") and instance.has_dynamic_partition("dbs", "a")
        a_left.set()
        b.join(60)
        assert seen["b"] == [True] * 3
        assert asked == ["a", "a"]  # once for run A, once for run B: each run knows its own answers
        assert "has_dynamic_partition" not in vars(instance)
        instance.delete_dynamic_partition("dbs", "a")
        assert not instance.has_dynamic_partition("dbs", "a")
