"""User data as a MIME multi-part archive: the form AWS Batch requires of a launch template's user data.

Batch merges its own part (the instance's ECS cluster) into the launch template's user data, so that user data must
be `multipart/mixed` (botocore's EC2 model, RequestLaunchTemplateData.UserData: "If you are creating the launch
template for use with Batch, the user data must be provided in the MIME multi-part archive format"; AWS Batch User
Guide, https://docs.aws.amazon.com/batch/latest/userguide/launch-templates.html, "Amazon EC2 user data in launch
templates"). cloud-init splits the archive and hands each part to the handler of its content type:
`text/x-shellscript` runs as a script, `text/cloud-config` is merged into the configuration
(canonical/cloud-init cloudinit/handlers/__init__.py, INCLUSION_TYPES_MAP; tests/test_user_data_mime_lab.py reads
gpunode's archive with Debian's cloud-init).
"""

from __future__ import annotations

from email import message_from_string
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText

# The content type of each of gpunode's formats inside the archive.
CONTENT_TYPES = {"shell": "text/x-shellscript", "cloud-init": "text/cloud-config"}
# gpunode's own boundary (the archive's parts never contain it: checked when it is written).
BOUNDARY = "==GPUNODE-USER-DATA=="


def mime_archive(parts: list[tuple[str, str]]) -> str:
    """A multipart/mixed archive of (format, text) parts, in order; each part is `shell` or `cloud-init`."""
    archive = MIMEMultipart("mixed", boundary=BOUNDARY)
    for number, (fmt, text) in enumerate(parts, 1):
        if BOUNDARY in text:
            raise ValueError(f"part {number} contains the MIME boundary {BOUNDARY}")
        subtype = CONTENT_TYPES[fmt].split("/", 1)[1]
        part = MIMEText(text, subtype, "us-ascii" if text.isascii() else "utf-8")
        part.add_header("Content-Disposition", "attachment", filename=f"gpunode-{number}-{fmt}")
        archive.attach(part)
    return archive.as_string() + "\n"


def is_mime_archive(text: str) -> bool:
    """True when the user data is a multipart MIME archive (what Batch takes), not a plain script or cloud-config."""
    head = text.lstrip()[:2048].lower()
    if not (head.startswith("content-type:") or head.startswith("mime-version:")):
        return False
    return message_from_string(text).is_multipart()
