#!/usr/bin/env python3
"""golden.py FRAMES.json... > tokens.json: the golden token set from pcap_frames.py output.

Keeps every RPC token (with its frame, for the body-hash check) whose (release, msg_type,
context, uid) was not seen yet, and every job/sbcast credential found inside a frame's body
(a JWT that is not the frame's own token)."""
import base64, json, re, sys

JWT = re.compile(rb'eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+')

def claims(t):
    p = t.split('.')[1]
    return json.loads(base64.urlsafe_b64decode(p + '=' * (-len(p) % 4)))

out, seen = [], set()
for path in sys.argv[1:]:
    for f in json.load(open(path)):
        c = claims(f['token'])
        key = (f['label'], f['msg_type'], c['context'], c['uid'])
        if key not in seen and f['body_ok'] and f['forward_cnt'] == 0:
            seen.add(key)
            out.append({'name': '%s %s msg_type %d uid %d' % (f['label'], c['context'], f['msg_type'], c['uid']),
                        'release': f['label'], 'kind': 'rpc', 'version': f['version'],
                        'msg_type': f['msg_type'], 'flags': f['flags'], 'token': f['token'], 'frame': f['frame']})
        for m in JWT.finditer(bytes.fromhex(f['frame'])):
            t = m.group().decode()
            if t == f['token']:
                continue
            c = claims(t)
            key = (f['label'], 'cred', c['context'], c['uid'], f['msg_type'])
            if key in seen:
                continue
            seen.add(key)
            out.append({'name': '%s %s credential in msg_type %d uid %d' % (f['label'], c['context'], f['msg_type'], c['uid']),
                        'release': f['label'], 'kind': c['context'], 'version': f['version'],
                        'msg_type': f['msg_type'], 'token': t})
json.dump(out, sys.stdout, indent=1)
print()
