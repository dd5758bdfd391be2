"""The bench's CPU meter on real processes."""

from __future__ import annotations

import os
import subprocess
import sys

from services.dev.bench.cpu import CpuMeter

IDLE = "import sys\nprint('ready', flush=True)\nsys.stdin.read()\n"


BURN = (
    "import sys\n"
    "print('ready', flush=True)\n"
    "sys.stdin.readline()\n"
    "total = sum(i * i for i in range(3_000_000))\n"
    "print('done', flush=True)\n"
    "sys.stdin.read()\n"
)


def test_the_meter_counts_the_cpu_a_process_spent_and_not_an_idle_ones() -> None:
    idle = subprocess.Popen(
        [sys.executable, "-c", IDLE], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    burner = subprocess.Popen(
        [sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert burner.stdin is not None and burner.stdout is not None and idle.stdout is not None
    try:
        assert idle.stdout.readline() == burner.stdout.readline() == b"ready\n"
        meter = CpuMeter({"idle": idle.pid, "burner": burner.pid})
        meter.start()  # both have started (Python's start-up is before this); both wait
        burner.stdin.write(b"go\n")
        burner.stdin.flush()
        assert burner.stdout.readline() == b"done\n"  # its fixed work is done
        spent = meter.stop()
    finally:
        for process in (idle, burner):
            process.kill()
            process.wait()
    assert spent["burner"] > 0.05  # three million squares take well over 50 ms of CPU
    assert spent["idle"] <= 0.02  # it only waited (at most a clock tick or two is charged)


def test_the_driver_is_charged_its_own_time_not_the_services_it_started() -> None:
    burner = subprocess.Popen(
        [sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert burner.stdin is not None and burner.stdout is not None
    try:
        assert burner.stdout.readline() == b"ready\n"
        meter = CpuMeter({"driver": os.getpid(), "burner": burner.pid})
        meter.start()
        burner.stdin.write(b"go\n")
        burner.stdin.flush()
        assert burner.stdout.readline() == b"done\n"  # the driver only waited meanwhile
        spent = meter.stop()
    finally:
        burner.kill()
        burner.wait()
    assert spent["burner"] > 0.05
    assert spent["driver"] < spent["burner"] / 2


def test_a_service_run_as_several_processes_is_charged_the_cpu_of_every_one() -> None:
    burners = [
        subprocess.Popen(
            [sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        for _ in range(2)
    ]
    try:
        for burner in burners:
            assert burner.stdout is not None and burner.stdout.readline() == b"ready\n"
        meter = CpuMeter(
            {
                "settlement": [b.pid for b in burners],
                "first": burners[0].pid,
                "second": burners[1].pid,
            }
        )
        meter.start()
        for burner in burners:  # one after the other: each does the same fixed work
            assert burner.stdin is not None and burner.stdout is not None
            burner.stdin.write(b"go\n")
            burner.stdin.flush()
            assert burner.stdout.readline() == b"done\n"
        spent = meter.stop()
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    assert spent["first"] > 0.05 and spent["second"] > 0.05
    # Read at the same moments, the service's figure is its processes' sum (to a clock tick).
    assert abs(spent["settlement"] - spent["first"] - spent["second"]) <= 0.03
