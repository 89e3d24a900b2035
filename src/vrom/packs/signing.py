"""Publisher keys and manifest signatures: who published a pack, checked before it is used.

A pack's ``manifest.json`` pins every file's size and SHA-256, so a signature over the manifest's
exact bytes covers the whole pack. A publisher makes an Ed25519 key pair once (`generate_key_pair`,
``vrom pack keygen``) and signs each manifest (`SigningKey.sign`, ``vrom pack build|publish
--sign``); the detached signature is ``manifest.json.sig`` beside the manifest. A reader that
trusts some keys (`check_signature`) refuses a pack that is unsigned, signed by another key, or
whose manifest changed after signing. Formats: docs/packs.md.

- ``<name>.key``: the private key, PEM (PKCS#8), mode 0600; a key readable by others is refused.
- ``<name>.pub``: the public key as one line, base64 of its raw 32 bytes; this text is what
  ``$VROM_TRUSTED_KEYS`` and ``trusted_keys=`` take (or the path of a ``.pub`` file).
- A key id is the first 16 hex digits of the SHA-256 of the raw public key.

The cryptography is the ``cryptography`` package's (the ``signing`` extra), imported only when a
key is made, a manifest signed or a signature checked; without it those raise `PackError`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vrom.bounded_json import loads_bounded
from vrom.errors import PackError, ValidationError
from vrom.settings import TRUSTED_KEYS_ENV

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

SIGNATURE_NAME = "manifest.json.sig"
PRIVATE_SUFFIX = ".key"
PUBLIC_SUFFIX = ".pub"
ALGORITHM = "ed25519"
MAX_SIGNATURE_BYTES = 4096
_KEY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class UnverifiedPackWarning(UserWarning):
    """A pack was accepted without checking who published it: no trusted keys are set."""


@dataclass(frozen=True)
class PublicKey:
    """An Ed25519 public key: its raw 32 bytes."""

    raw: bytes

    def __post_init__(self) -> None:
        if len(self.raw) != 32:
            raise PackError(f"an Ed25519 public key is 32 bytes, not {len(self.raw)}")

    @property
    def key_id(self) -> str:
        """The first 16 hex digits of the SHA-256 of the raw key."""
        return hashlib.sha256(self.raw).hexdigest()[:16]

    @property
    def text(self) -> str:
        """The key as a ``.pub`` file and ``$VROM_TRUSTED_KEYS`` hold it: base64 of 32 bytes."""
        return base64.b64encode(self.raw).decode("ascii")

    @classmethod
    def from_text(cls, text: str) -> PublicKey | None:
        """Return the key ``text`` spells (base64 of 32 bytes), or None if it spells none."""
        try:
            raw = base64.b64decode(text.strip(), validate=True)
        except (binascii.Error, ValueError):
            return None
        return cls(raw) if len(raw) == 32 else None

    @classmethod
    def load(cls, value: str) -> PublicKey:
        """Return the key ``value`` spells, or the key in the ``.pub`` file it names."""
        key = cls.from_text(value)
        if key is not None:
            return key
        path = Path(value.strip()).expanduser()
        try:
            text = path.read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as exc:
            raise PackError(
                f"trusted key {value!r} is neither a public key (base64 of 32 bytes, as in a "
                f".pub file) nor a readable .pub file"
            ) from exc
        key = cls.from_text(text)
        if key is None:
            raise PackError(f"{path} does not hold an Ed25519 public key (base64 of 32 bytes)")
        return key


def load_trusted_keys(values: Iterable[str | PublicKey]) -> tuple[PublicKey, ...]:
    """Return the keys ``values`` give (keys, key texts or ``.pub`` paths), without repeats."""
    keys: dict[str, PublicKey] = {}
    for value in values:
        key = value if isinstance(value, PublicKey) else PublicKey.load(value)
        keys.setdefault(key.key_id, key)
    return tuple(keys.values())


@dataclass(frozen=True)
class ManifestSignature:
    """What ``manifest.json.sig`` holds: the signer's key (as it claims) and the signature.

    ``public_key`` lets a publisher check a signature before publishing it; a reader never trusts
    it, and checks the signature with its own copy of the key whose id is ``key_id``.
    """

    public_key: PublicKey
    signature: bytes

    @property
    def key_id(self) -> str:
        """The id of the key that made the signature."""
        return self.public_key.key_id

    def to_bytes(self) -> bytes:
        """Return the signature file's contents (JSON)."""
        data = {
            "algorithm": ALGORITHM,
            "key_id": self.key_id,
            "public_key": self.public_key.text,
            "signature": base64.b64encode(self.signature).decode("ascii"),
        }
        return (json.dumps(data, indent=2) + "\n").encode("utf-8")

    @classmethod
    def from_bytes(cls, raw: bytes, where: str) -> ManifestSignature:
        """Return the signature a ``manifest.json.sig`` holds, or raise `PackError`."""
        try:
            data: Any = loads_bounded(
                raw, max_depth=2, max_bytes=MAX_SIGNATURE_BYTES, what=f"{where}: the signature"
            )
            algorithm = data["algorithm"]
            key = PublicKey.from_text(str(data["public_key"]))
            signature = base64.b64decode(str(data["signature"]), validate=True)
            key_id = str(data["key_id"])
        except ValidationError as exc:
            raise PackError(f"{exc}: the signature file is malformed") from exc
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise PackError(f"{where}: the signature file is malformed ({exc})") from exc
        if algorithm != ALGORITHM:
            raise PackError(f"{where}: the signature is {algorithm!r}, not {ALGORITHM}")
        if key is None or len(signature) != 64 or key.key_id != key_id:
            raise PackError(f"{where}: the signature file is malformed (key, id or length)")
        return cls(key, signature)


class SigningKey:
    """A publisher's private key, loaded from its ``.key`` file."""

    def __init__(self, private: Ed25519PrivateKey, path: Path) -> None:
        from cryptography.hazmat.primitives import serialization

        self._private = private
        self.path = path
        self.public_key = PublicKey(
            private.public_key().public_bytes(
                serialization.Encoding.Raw, serialization.PublicFormat.Raw
            )
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SigningKey:
        """Return the key in a ``.key`` file (PEM), refusing one that others can read."""
        _require_cryptography()
        from cryptography.exceptions import UnsupportedAlgorithm
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        file = Path(path).expanduser()
        try:
            mode = stat.S_IMODE(file.stat().st_mode)
            data = file.read_bytes()
        except OSError as exc:
            raise PackError(f"cannot read the signing key {file}: {exc.strerror or exc}") from exc
        if os.name == "posix" and mode & 0o077:
            raise PackError(
                f"signing key {file} can be read by other users (mode {mode:04o}): chmod 600 {file}"
            )
        try:
            private = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
            raise PackError(
                f"{file} is not an unencrypted PEM private key (make one with vrom pack keygen)"
            ) from exc
        if not isinstance(private, Ed25519PrivateKey):
            raise PackError(f"{file} is not an Ed25519 key (make one with vrom pack keygen)")
        return cls(private, file)

    def sign(self, manifest_raw: bytes) -> ManifestSignature:
        """Return the signature of a manifest's exact bytes."""
        return ManifestSignature(self.public_key, self._private.sign(manifest_raw))


@dataclass(frozen=True)
class KeyPair:
    """Where `generate_key_pair` wrote a key pair, and its public key."""

    private_path: Path
    public_path: Path
    public_key: PublicKey


def generate_key_pair(folder: str | os.PathLike[str], name: str = "publisher") -> KeyPair:
    """Write a new Ed25519 key pair as ``folder/name.key`` (0600) and ``.pub``; return them.

    An existing key file is never overwritten.
    """
    if not _KEY_NAME.match(name):
        raise PackError(f"key name {name!r} must be 1-64 of A-Z, a-z, 0-9, '.', '_', '-'")
    _require_cryptography()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    target = Path(folder).expanduser()
    private_path = target / f"{name}{PRIVATE_SUFFIX}"
    public_path = target / f"{name}{PUBLIC_SUFFIX}"
    for path in (private_path, public_path):
        if path.exists():
            raise PackError(
                f"{path} exists: choose another name or folder (keys are never overwritten)"
            )
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    key = SigningKey(private, private_path)
    try:
        target.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as out:
            out.write(pem)
        public_path.write_text(key.public_key.text + "\n", encoding="ascii")
    except OSError as exc:
        raise PackError(f"cannot write the key pair into {target}: {exc.strerror or exc}") from exc
    return KeyPair(private_path, public_path, key.public_key)


def check_signature(
    what: str,
    manifest_raw: bytes,
    signature_raw: bytes | None,
    trusted: Sequence[PublicKey],
) -> str | None:
    """Return the id of the trusted key that signed the manifest (None when none are trusted).

    With trusted keys, an unsigned manifest, one signed by a key not among them, or one whose
    signature does not match its bytes raises `PackError` naming ``what`` (e.g. ``pack alpha
    1.0.0``), the key id and what to do. With none, nothing is checked.
    """
    if not trusted:
        return None
    if signature_raw is None:
        raise PackError(
            f"{what} is not signed, and only packs signed by a trusted key are accepted "
            f"(trusted keys are set: ${TRUSTED_KEYS_ENV} or trusted_keys=): refused; ask its "
            "publisher for a signed pack"
        )
    signature = ManifestSignature.from_bytes(signature_raw, what)
    key = next((k for k in trusted if k.key_id == signature.key_id), None)
    if key is None:
        known = ", ".join(k.key_id for k in trusted)
        raise PackError(
            f"{what} is signed by key {signature.key_id}, which is not a trusted key "
            f"({known}): refused; if you trust its publisher, add their public key to "
            f"${TRUSTED_KEYS_ENV}"
        )
    if not verify_signature(key, signature.signature, manifest_raw):
        raise PackError(
            f"{what}: its signature by key {key.key_id} does not match its manifest (the "
            "manifest was changed after signing): refused"
        )
    return key.key_id


def check_own_signature(what: str, manifest_raw: bytes, signature: ManifestSignature) -> None:
    """Raise `PackError` unless the signature matches the manifest under its own stated key.

    A publisher's check that a signature still belongs to its manifest; it says nothing about who
    made it.
    """
    if not verify_signature(signature.public_key, signature.signature, manifest_raw):
        raise PackError(
            f"{what}: its signature (key {signature.key_id}) does not match its manifest (the "
            "manifest changed after signing): sign it again with --sign KEY"
        )


def unverified_message(what: str, signature_raw: bytes | None) -> str:
    """Return the warning for a pack accepted while no trusted keys are set."""
    hint = (
        f"set ${TRUSTED_KEYS_ENV} (or trusted_keys=) to accept only packs signed by keys you trust"
    )
    if signature_raw is None:
        return (
            f"{what} is not signed: its files are checked against its manifest, but not who "
            f"published it; {hint}"
        )
    try:
        signer = f"key {ManifestSignature.from_bytes(signature_raw, what).key_id}"
    except PackError:
        signer = "a malformed signature"
    return (
        f"{what} is signed by {signer}, but no trusted keys are set, so it was not checked; {hint}"
    )


def verify_signature(key: PublicKey, signature: bytes, data: bytes) -> bool:
    """Return whether ``signature`` is ``key``'s Ed25519 signature of ``data``."""
    _require_cryptography()
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(key.raw).verify(signature, data)
    except InvalidSignature:
        return False
    return True


def _require_cryptography() -> None:
    """Raise `PackError` saying how to install ``cryptography`` when it is missing."""
    try:
        import cryptography  # noqa: F401
    except ImportError as exc:
        raise PackError(
            "signing packs and checking their signatures need the cryptography package: "
            "pip install 'vrom[signing]'"
        ) from exc
