"""``Timer``, ``Measurement`` and ``Compare`` (see the package docstring)."""
import enum
import statistics
import textwrap
import timeit

__all__ = ["Timer", "Measurement", "Compare", "Language"]


class Language(enum.Enum):
    """The language of the statement: ember times Python only."""
    PYTHON = 0
    CPP = 1


class Measurement:
    """The times of ``number_per_run`` runs per block, per block in ``raw_times``;
    ``times`` are per run."""

    def __init__(self, number_per_run, raw_times, task_spec=None, metadata=None):
        self.number_per_run = number_per_run
        self.raw_times = list(raw_times)
        self.task_spec = task_spec or {}
        self.metadata = metadata

    @property
    def times(self):
        """Seconds per run, one value per block."""
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def mean(self):
        return statistics.mean(self.times)

    @property
    def median(self):
        return statistics.median(self.times)

    @property
    def iqr(self):
        if len(self.times) < 2:
            return 0.0
        q = statistics.quantiles(self.times, n=4, method="inclusive")
        return q[2] - q[0]

    def __getattr__(self, name):
        spec = self.__dict__.get("task_spec") or {}
        if name in ("stmt", "setup", "label", "sub_label", "description", "num_threads",
                    "env"):
            return spec.get(name)
        raise AttributeError(name)

    def __repr__(self):
        unit, scale = _unit(self.median)
        head = "\n".join(x for x in (self.label, self.stmt if not self.label else None,
                                     self.description) if x)
        return (f"<ember.utils.benchmark.Measurement object at {hex(id(self))}>\n{head}\n"
                f"  Median: {self.median * scale:.2f} {unit}\n"
                f"  IQR:    {self.iqr * scale:.2f} {unit} "
                f"({len(self.times)} measurements, {self.number_per_run} runs per "
                f"measurement, {self.num_threads} thread"
                f"{'s' if self.num_threads != 1 else ''})")


def _unit(seconds):
    for unit, scale in (("s", 1), ("ms", 1e3), ("us", 1e6)):
        if seconds >= 1 / scale:
            return unit, scale
    return "ns", 1e9


class Timer:
    """Time ``stmt`` (a string or, as an ember extension of torch's API, a callable)
    after running ``setup`` once, in namespace ``globals``."""

    def __init__(self, stmt="pass", setup="pass", global_setup="",
                 timer=timeit.default_timer, globals=None, label=None, sub_label=None,
                 description=None, env=None, num_threads=1, language=Language.PYTHON):
        if language not in (Language.PYTHON, "py", "python"):
            raise ValueError("ember's Timer times Python statements only (language=CPP "
                             "needs torch's C++ toolchain)")
        if global_setup:
            raise ValueError("global_setup is only for C++ statements")
        if not isinstance(stmt, str) and not callable(stmt):
            raise ValueError("stmt must be a string or a callable")
        stmt = textwrap.dedent(stmt) if isinstance(stmt, str) else stmt
        setup = textwrap.dedent(setup) if isinstance(setup, str) else setup
        self._globals = dict(globals or {})
        self._timer = timeit.Timer(stmt=stmt, setup=setup, timer=timer,
                                   globals=self._globals)
        self._timer_fn = timer
        self._task_spec = {"stmt": stmt if isinstance(stmt, str) else repr(stmt),
                           "setup": setup, "label": label, "sub_label": sub_label,
                           "description": description, "env": env,
                           "num_threads": num_threads}
        self._num_threads = num_threads

    def _run(self, number):
        from ember._legacy import get_num_threads, set_num_threads
        before = get_num_threads()
        set_num_threads(self._num_threads)
        try:
            return self._timer.timeit(number)
        finally:
            set_num_threads(before)

    def timeit(self, number=1000000):
        """Run the statement ``number`` times (after one warm-up run)."""
        self._run(1)
        return Measurement(number, [self._run(number)], self._task_spec)

    def repeat(self, repeat=-1, number=-1):
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def autorange(self, callback=None):
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def _block_size(self, min_run_time):
        number = 1
        while True:
            elapsed = self._run(number)
            # blocks of about a thousandth of the total run time, and at least 1 ms
            if elapsed >= max(min_run_time / 1000, 1e-3) or number >= 10 ** 7:
                return number
            number *= 10

    def blocked_autorange(self, callback=None, min_run_time=0.2):
        """Time blocks of runs until ``min_run_time`` seconds have been measured."""
        number = self._block_size(min_run_time)
        times, total = [], 0.0
        while total < min_run_time or not times:
            t = self._run(number)
            if callback is not None:
                callback(number, t)
            times.append(t)
            total += t
        return Measurement(number, times, self._task_spec)

    def adaptive_autorange(self, threshold=0.1, *, min_run_time=0.01, max_run_time=10.0,
                           callback=None):
        """Time blocks until the IQR is within ``threshold`` of the median (and at
        least ``min_run_time``) or ``max_run_time`` has passed."""
        number = self._block_size(0.05)
        times, total = [], 0.0
        while total < max_run_time:
            t = self._run(number)
            if callback is not None:
                callback(number, t)
            times.append(t)
            total += t
            if total >= min_run_time and len(times) >= 3:
                m = Measurement(number, times, self._task_spec)
                if m.iqr / m.median < threshold:
                    break
        return Measurement(number, times, self._task_spec)


class Compare:
    """Print several measurements as one table (median per row)."""

    def __init__(self, results):
        self._results = list(results)

    def __str__(self):
        rows = []
        for m in self._results:
            unit, scale = _unit(m.median)
            name = " ".join(x for x in (m.label, m.sub_label, m.description) if x)
            rows.append(f"  {name or m.stmt:<40} {m.median * scale:10.2f} {unit}")
        return "\n".join(["[" + "-" * 50 + "]", *rows, "[" + "-" * 50 + "]"])

    def print(self):
        print(str(self))
