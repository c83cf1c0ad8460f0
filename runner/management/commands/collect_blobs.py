from django.core.management.base import BaseCommand

from runner.execution.collector import blobs_collect


class Command(BaseCommand):
    help = (
        "Remove the blobs nothing names any more (no run, step or prepared task) that are older than the grace "
        "period, and the agent package and prepared task folders nothing uses; a worker sends this job every "
        "BENCH_BLOB_COLLECT_EVERY_S."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--grace-s",
            type=float,
            help="keep what is younger than this many seconds (default BENCH_BLOB_COLLECT_GRACE_S): a blob a live "
            "run has just stored may not be named yet",
        )
        parser.add_argument("--dry-run", action="store_true", help="count what would go; remove nothing")

    def handle(self, *args, **opts) -> None:
        done = blobs_collect(grace_s=opts["grace_s"], dry_run=opts["dry_run"])
        verb = "would remove" if opts["dry_run"] else "removed"
        self.stdout.write(
            f"{verb} {done.removed} blobs ({done.freed_bytes / (1 << 20):.1f} MB on disk) and "
            f"{len(done.folders)} unused folders; kept {done.kept} blobs"
        )
        for folder in done.folders:
            self.stdout.write(f"  {folder}")
