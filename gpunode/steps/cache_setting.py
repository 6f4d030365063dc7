"""What a `module_cache` setting names (off, the default folder, a folder, an https URL's mirror), and the checks
made on it and on the names of a module's cache key when the playbook is read (exit 2, file:line, before any
host)."""

from __future__ import annotations

from pathlib import Path

from gpunode.modcache.key import PLAIN_NAME
from gpunode.modcache.store import Store, cache_home
from gpunode.modcache.url_source import mirror_store, url_problem
from gpunode.steps.model import ArgumentError, StepFailed
from gpunode.values import cache_folder


def cache_store(cache: str | bool) -> Store | None:
    """The store a `module_cache` value names: "" or true the controller's default folder, off/false/no/none (YAML
    reads an unquoted `off` as false) no cache, an https URL its mirror folder on the controller, else that folder."""
    folder = cache_folder(cache)
    if folder is None:
        return None
    if "://" in folder:
        if problem := url_problem(folder):
            raise StepFailed(problem, fix=URL_FIX)
        return mirror_store(folder, cache_home())
    return Store(folder or None)


def check_cache_setting(cache: str | bool, arg: str) -> None:
    """A step's module cache argument `arg` checked when the playbook is read (exit 2 with file:line and the variable
    that set it, before any host): a URL must be plain https, a folder must not be an existing file."""
    folder = cache_folder(cache)
    if not folder:
        return
    if "://" in folder:
        if problem := url_problem(folder):
            raise ArgumentError(f"{problem}; {URL_FIX}", arg)
    elif (path := Path(folder).expanduser()).exists() and not path.is_dir():
        raise ArgumentError(f"the module cache {folder} is a file, not a folder; name a folder on the controller (it "
                            "is made when missing), an https URL, or off", arg)


def check_key_names(arg_values: dict[str, str]) -> None:
    """Names that become part of a module cache key and of paths and commands on the host (`name`, `version`,
    `kernel`, `flavour`, `signer` of a dkms_module step) must be plain: refused when the playbook is read."""
    for arg, value in arg_values.items():
        if value and not PLAIN_NAME.match(value):
            raise ArgumentError(f"dkms_module.{arg} {value!r} is not a plain name (letters, digits and . _ + ~ -, "
                                "starting with a letter or digit)", arg)


# Bucket URLs: S3 virtual-hosted style https://BUCKET.s3.REGION.amazonaws.com/KEY
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/VirtualHosting.html); OSS https://BucketName.Endpoint/object,
# e.g. examplebucket.oss-cn-hangzhou.aliyuncs.com (https://help.aliyun.com/en/oss/developer-reference/overview-24).
URL_FIX = ("give the bucket's https URL (https://BUCKET.s3.REGION.amazonaws.com/PREFIX, "
           "https://BUCKET.oss-REGION.aliyuncs.com/PREFIX), a folder on a mounted share, or module_cache: off")
