# A real SMTP server on 127.0.0.1 (aiosmtpd): appends each message it accepts, parsed by Python's
# email package, as one JSON line to argv[1]; binds port 0 and writes the port to argv[2].
# Used by the injection suite (crates/toolgate-check) and the email tests (crates/toolgate-notes).
import asyncio, email, json, os, sys
from email import policy
from aiosmtpd.smtp import SMTP

out_path, port_path = sys.argv[1], sys.argv[2]

class Handler:
    async def handle_DATA(self, server, session, envelope):
        raw = envelope.original_content or envelope.content
        msg = email.message_from_bytes(raw, policy=policy.default)
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": list(envelope.rcpt_tos),
            "to": str(msg["To"] or ""),
            "subject": str(msg["Subject"] or ""),
            "message_id": str(msg["Message-ID"] or ""),
            "body": msg.get_content(),
            "raw": raw.decode("utf-8", "replace"),
        }
        with open(out_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        return "250 Message accepted for delivery"

async def main():
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: SMTP(Handler()), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    with open(port_path + ".tmp", "w") as f:
        f.write(str(port))
    os.replace(port_path + ".tmp", port_path)
    await asyncio.Event().wait()

asyncio.run(main())
