"""The wallet client's time-out bounds the whole call, on a real loopback socket."""

from __future__ import annotations

import asyncio

from services.gateway.domain import Kind
from services.gateway.wallet import WalletClient, judge

BODY = b'{"balance": 100}'


async def test_a_wallet_trickling_its_answer_is_no_answer_once_the_time_out_is_spent() -> None:
    """Each byte within the client's per-read time-out, the whole answer far beyond it: no
    answer (the debit's fate unknown, so it is rolled back), not a call standing for as long as
    the wallet likes (16 KiB at one byte a read time-out: most of a day)."""

    async def wallet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(BODY))
        for byte in BODY:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.1)
        writer.close()

    server = await asyncio.start_server(wallet, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = WalletClient(f"http://127.0.0.1:{port}", "s" * 40, timeout=0.3)
    try:
        answer = await asyncio.wait_for(client.call(Kind.DEBIT, {"transaction_id": "t"}), 10)
    finally:
        await client.close()
        server.close()
        await server.wait_closed()
    assert answer.status is None and answer.error == "no whole answer within 0.3 s"
    verdict = judge(Kind.DEBIT, answer)
    assert (verdict.outcome, verdict.reason_code) == ("unknown", "WALLET_UNAVAILABLE")
