# Regenerates the stream corpus: valid/*.jsonl and invalid/*.jsonl with their .expect sidecars
# ("<line>: <rule substring>" or "end: <rule substring>"). Run: python3 generate.py
import json, os
base=os.path.dirname(os.path.abspath(__file__))
os.makedirs(base+'/valid',exist_ok=True); os.makedirs(base+'/invalid',exist_ok=True)
SID='s1'
def H(continued=False, **kw):
    d={"type":"hello","proto":"openmax-stdio/6","protocol_version":6,"session_id":SID,"version":"0.2.0","project":"/work/p","continued":continued}
    d.update(kw); return json.dumps(d,separators=(',',':'),ensure_ascii=False)
def E(t, sid=SID, **f):
    d={}
    if sid is not None: d["session_id"]=sid
    d["type"]=t; d.update(f)
    return json.dumps(d,separators=(',',':'),ensure_ascii=False)
def NS(t, **f): return E(t, sid=None, **f)
def T(messages=None, truncated=False):
    return json.dumps({"type":"transcript","session_id":SID,"messages":messages or [{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}],"truncated":truncated},separators=(',',':'))
tok=lambda s: E("token",text=s)
md=lambda s: E("message_done",text=s)
done=lambda r: E("done",stop_reason=r)
ts=lambda c,n="read_file",a=None: E("tool_start",call_id=c,name=n,args=a if a is not None else {"path":"a.rs"})
te=lambda c,ok=True,o="ok": E("tool_end",call_id=c,ok=ok,output=o)
ar=lambda a,reason="gate",sp="",ss="",**kw: E("approval_request",approval_id=a,name="write_file",summary="write a.rs",detail="3 lines",reason=reason,source_path=sp,source_sha=ss,**kw)
ast=lambda a,o: E("approval_settled",approval_id=a,outcome=o)
retry=lambda a,m: E("retry",attempt=a,max_attempts=m,reason="HTTP 503 from the endpoint")
usage=lambda c=None: E("usage",prompt_tokens=120,completion_tokens=30,cached_tokens=c)
budget=E("budget",used_tokens=1500,context_tokens=128000)
changes=[{"kind":"tool","name":"lint","change":"added","path":".openmax/tools/lint.toml","by":"outside"}]

valid={
 'simple_turn':[H(),tok("Hel"),tok("lo"),md("Hello"),budget,usage(),done("stop")],
 'continued_session':[H(True),T(),tok("again"),md("again"),usage(5),done("stop")],
 'tools_and_diff':[H(),E("thinking",text="let me read"),md(""),ts("c1"),te("c1",o="fn main(){}"),ts("c2","edit_file",{"path":"a.rs","old":"a","new":"b"}),
     E("diff",call_id="c2",path="a.rs",diff="@@ -1 +1 @@\n-a\n+b\n",added=1,removed=1),te("c2"),E("harness_note",call_id="c2",text="refreeze receipt: tool lint changed"),
     tok("Done"),md("Done"),usage(10),budget,done("stop")],
 'gate_approval':[H(),md(""),ts("c1","write_file",{"path":"b.rs","content":"x"}),ar("a1"),ast("a1","approved"),
     E("diff",call_id="c1",path="b.rs",diff="+x\n",added=1,removed=0),te("c1"),tok("Wrote b.rs"),md("Wrote b.rs"),done("stop")],
 'unapproved_source':[H(),md(""),ts("c1","lint",{}),ar("a1","unapproved_source",".openmax/tools/lint.toml","0123456789ab",env=["GITHUB_TOKEN"]),
     ast("a1","declined"),te("c1",False,"declined by the user"),tok("ok"),md("ok"),done("stop")],
 'retries':[H(),retry(2,4),E("thinking",text="hmm"),retry(3,4),tok("fine"),md("fine"),usage(),budget,done("stop"),
     md(""),ts("c1"),te("c1"),retry(2,4),tok("x"),md("x"),done("length")],
 'stream_error':[H(),tok("par"),tok("tial"),E("error",message="provider stream error: overloaded"),done("error"),
     tok("second"),md("second"),done("stop")],
 'truncated':[H(),tok("cut off"),md("cut off"),E("error",message="stream ended with no completion signal"),done("truncated")],
 'refused_and_between_turns':[H(),NS("protocol_error",message="empty text"),done("refused"),NS("approval_mode",mode="auto"),
     E("refrozen",tools=["read_file","lint"],skills=["review"],changes=changes),E("hook_failed",hook="notify",event="turn_end",detail="exit 1"),
     tok("hi"),md("hi"),done("stop"),NS("approval_mode",mode="readonly"),NS("protocol_error",message="unknown cmd \"x\"")],
 'turn_refused':[H(),tok("done!"),md("done!"),E("turn_refused",hook="verify",reason="tests fail",continuation=0,continuations_left=8),
     tok("fixed"),md("fixed"),E("turn_refused",hook="verify",reason="still failing",continuation=1,continuations_left=7),
     tok("now"),md("now"),done("unverified")],
 'compaction_and_schemas':[H(),E("schemas_over_budget",schema_tokens=9000,budget_tokens=12000),E("compacted",tokens_before=100000,tokens_after=40000,compacted_messages=12),
     E("harness_note",call_id="",text="turn-start receipt"),tok("ok"),md("ok"),done("stop"),E("compacted",tokens_before=40000,tokens_after=40000,compacted_messages=0),done("budget_exhausted")],
 'cancel_and_quit':[H(),md(""),ts("c1","shell",{"cmd":"make"}),ar("a1"),ast("a1","cancelled"),te("c1",False,"cancelled"),done("cancelled"),
     md(""),ts("c2","shell",{"cmd":"ls"}),ar("a2"),ast("a2","declined"),te("c2",False,"declined"),done("cancelled")],
 'misc_stop_reasons':[H(),done("blocked"),md(""),ts("c1"),te("c1"),done("max_iterations"),
     tok("a"),NS("protocol_error",message="approve names unknown id"),md("a"),done("end_turn"),ar("a3"),ast("a3","timed_out"),md(""),done("stop")],
 'crash':[H(),E("error",message="internal error: the turn died"),done("error")],
}

I=[]  # (name, lines, expect)
def inv(name, lines, exp): I.append((name,lines,exp))
h=H()
inv('empty_stream',[], 'end: empty stream')
inv('no_hello',[tok("hi"),md("hi"),done("stop")],'1: the first line must be hello')
inv('bad_proto',[H(proto="openmax-stdio/5"),done("stop")],'1: hello.proto must be "openmax-stdio/6"')
inv('bad_protocol_version',[H(protocol_version="6"),done("stop")],'1: hello.protocol_version must be the integer 6')
inv('hello_twice',[h,h],'2: hello may appear only as the first line')
inv('transcript_not_continued',[h,T()],'2: transcript appears but hello said continued: false')
inv('transcript_missing',[H(True),tok("x"),md("x"),done("stop")],'2: hello said continued: true, so line 2 must be transcript')
inv('transcript_late',[H(True),T(),T()],'3: transcript may appear only as the second line')
inv('session_mismatch',[h,E("token",sid="s2",text="x"),md("x"),done("stop")],'2: session_id "s2" differs from the hello\'s "s1"')
inv('missing_session_id',[h,NS("token",text="x"),md("x"),done("stop")],'2: token line has no "session_id" field')
inv('protocol_error_with_session',[h,E("protocol_error",message="bad")],'2: protocol_error line carries "session_id"')
inv('not_json',[h,'{"type":"token",'],'2: not valid JSON')
inv('not_object',[h,'[1,2]'],'2: not a JSON object')
inv('unknown_type',[h,E("tokens",text="x")],'2: unknown type "tokens"')
inv('command_line',[h,'{"cmd":"user","text":"hi"}'],'2: this is a client command')
inv('missing_field',[h,E("done")],'2: done line has no "stop_reason" field')
inv('wrong_bool',[h,md(""),ts("c1"),E("tool_end",call_id="c1",ok="true",output=""),done("stop")],'4: tool_end.ok must be true or false')
inv('negative_uint',[h,E("budget",used_tokens=-1,context_tokens=10),done("stop")],'2: budget.used_tokens must be a non-negative integer')
inv('unknown_field',[h,E("token",text="x",delta="x"),md("x"),done("stop")],'2: unknown field "delta" on a token line')
inv('bad_reason',[h,ar("a1",reason="ask"),ast("a1","approved"),done("stop")],'2: approval_request.reason "ask" is not one of gate, unapproved_source')
inv('bad_outcome',[h,ar("a1"),ast("a1","denied"),done("stop")],'3: approval_settled.outcome "denied" is not one of')
inv('bad_mode',[h,NS("approval_mode",mode="yolo")],'2: approval_mode.mode "yolo" is not one of auto, ask, readonly')
inv('empty_stop_reason',[h,done("")],'2: done.stop_reason is empty')
inv('bad_source_sha',[h,ar("a1","unapproved_source","t.toml","ABCDEF123456"),ast("a1","declined"),done("stop")],'2: approval_request.source_sha "ABCDEF123456" must be 12 lowercase hex digits')
inv('short_source_sha',[h,ar("a1","unapproved_source","t.toml","0123abc"),ast("a1","declined"),done("stop")],'2: must be 12 lowercase hex digits when reason is unapproved_source')
inv('gate_with_source',[h,ar("a1","gate","t.toml",""),ast("a1","declined"),done("stop")],'2: reason gate must have empty source_path and source_sha')
inv('empty_env',[h,ar("a1",env=[]),ast("a1","declined"),done("stop")],'2: env is present but empty')
inv('tokens_without_message_done',[h,tok("a"),tok("b"),done("stop")],'4: the token run from line 2 was not ended by message_done before done')
inv('done_error_without_error',[h,tok("a"),md("a"),done("error")],'4: done with stop_reason error has no error line before it in this turn')
inv('done_truncated_without_error',[h,tok("a"),md("a"),done("truncated")],'4: done with stop_reason truncated has no error line')
inv('tool_end_unknown_call',[h,md(""),E("tool_end",call_id="c9",ok=True,output=""),done("stop")],'3: tool_end names call_id "c9" that no tool_start opened')
inv('tool_end_twice',[h,md(""),ts("c1"),te("c1"),te("c1"),done("stop")],'5: tool_end names call_id "c1" that no tool_start opened')
inv('diff_unknown_call',[h,md(""),ts("c1"),E("diff",call_id="c2",path="a",diff="",added=0,removed=0),te("c1"),done("stop")],'4: diff names call_id "c2" that is not an open tool call')
inv('diff_after_tool_end',[h,md(""),ts("c1"),te("c1"),E("diff",call_id="c1",path="a",diff="",added=0,removed=0),done("stop")],'5: diff names call_id "c1"')
inv('tool_not_ended',[h,md(""),ts("c1"),done("stop")],'4: tool_start at line 3 (call_id "c1") was not ended by tool_end before its turn\'s done')
inv('duplicate_tool_start',[h,md(""),ts("c1"),ts("c1"),te("c1"),done("stop")],'4: tool_start opens call_id "c1", which is already open')
inv('settled_unknown',[h,md(""),ast("a9","approved"),done("stop")],'3: approval_settled names approval_id "a9" that no approval_request issued')
inv('settled_twice',[h,ar("a1"),ast("a1","approved"),ast("a1","approved"),done("stop")],'4: approval_settled names approval_id "a1"')
inv('approval_unsettled_at_done',[h,ar("a1"),done("cancelled")],'3: approval_request at line 2 (approval_id "a1") was not settled before its turn\'s done')
inv('retry_over_max',[h,retry(4,3),tok("a"),md("a"),done("stop")],'2: retry.attempt 4 exceeds max_attempts 3')
inv('retry_attempt_one',[h,retry(1,3),tok("a"),md("a"),done("stop")],'2: retry.attempt 1 < 2')
inv('retry_not_increasing',[h,retry(3,4),retry(2,4),tok("a"),md("a"),done("stop")],'3: retry.attempt 2 does not increase on the previous retry\'s 3')
inv('retry_max_changes',[h,retry(2,3),retry(3,5),tok("a"),md("a"),done("stop")],'3: retry.max_attempts 5 differs from 3')
inv('retry_after_token',[h,tok("a"),retry(2,3),tok("a"),md("a"),done("stop")],'3: retry after token lines of the same request (from line 2)')
inv('turn_refused_not_counting_down',[h,md("a"),E("turn_refused",hook="v",reason="r",continuation=0,continuations_left=8),md("b"),E("turn_refused",hook="v",reason="r",continuation=1,continuations_left=8),md("c"),done("stop")],'5: turn_refused.continuations_left 8 does not count down from 8')
inv('turn_refused_without_message_done',[h,E("turn_refused",hook="v",reason="r",continuation=0,continuations_left=8),md("c"),done("stop")],'2: turn_refused with no message_done before it')
inv('schemas_over_budget_twice',[h,E("schemas_over_budget",schema_tokens=1,budget_tokens=2),E("schemas_over_budget",schema_tokens=1,budget_tokens=2)],'3: schemas_over_budget again (first at line 2)')
inv('refused_without_protocol_error',[h,done("refused")],'2: done with stop_reason refused must directly follow its protocol_error')
inv('refused_not_directly_after',[h,NS("protocol_error",message="empty text"),NS("approval_mode",mode="ask"),done("refused")],'4: must directly follow its protocol_error')
inv('refused_inside_turn',[h,tok("a"),md("a"),NS("protocol_error",message="x"),done("refused")],'5: done refused ends the turn that began at line 2')
inv('turn_without_done',[h,tok("a"),md("a")],'end: the turn that began at line 2 has no done')
inv('tool_open_at_end',[h,md(""),ts("c1")],'end: tool_start at line 3 (call_id "c1") was not ended by tool_end before the stream ended')
inv('refrozen_inside_turn',[h,tok("a"),E("refrozen",tools=[],skills=[],changes=[]),md("a"),done("stop")],'3: refrozen inside the turn that began at line 2')
inv('token_after_error',[h,tok("a"),E("error",message="boom"),tok("b"),done("error")],'4: token after the error at line 3')
inv('blank_line',[h,'',done("stop")],'2: blank line')
inv('harness_note_unknown_call',[h,md(""),ts("c1"),te("c1"),E("harness_note",call_id="c7",text="n"),md(""),done("stop")],'5: harness_note names call_id "c7" that no tool_start of this turn opened')
inv('continued_stream_ends',[H(True)],'end: hello said continued: true but the stream ended before the transcript line')
inv('bad_change_kind',[h,E("refrozen",tools=["a"],skills=[],changes=[dict(changes[0],kind="plugin")])],'2: refrozen.changes[0].kind "plugin" is not one of tool, skill, prompt, hook')
inv('transcript_bad_role',[H(True),T([{"role":"system","content":"x"}])],'2: transcript.messages[0].role "system" is not one of user, assistant')
inv('transcript_message_too_long',[H(True),T([{"role":"user","content":"é"*4097}])],'2: transcript.messages[0].content has 4097 characters; the cap is 4096')
inv('cached_tokens_string',[h,E("usage",prompt_tokens=1,completion_tokens=1,cached_tokens="0"),done("stop")],'2: usage.cached_tokens must be a non-negative integer or null')
inv('args_not_object',[h,md(""),E("tool_start",call_id="c1",name="x",args=[]),te("c1"),done("stop")],'3: tool_start.args must be an object')
inv('empty_call_id',[h,md(""),ts(""),done("stop")],'3: tool_start.call_id is empty')
inv('tools_not_strings',[h,E("refrozen",tools=[1],skills=[],changes=[])],'2: refrozen.tools must be an array of strings')
inv('message_done_twice',[h,tok("a"),md("a"),md("a"),done("stop")],'4: a second message_done for one model reply (the first at line 3)')
inv('message_done_after_error',[h,tok("a"),E("error",message="boom"),md("a"),done("error")],'4: message_done after the error at line 3')

for n,(name,lines) in enumerate(valid.items(),1):
    open(f'{base}/valid/{n:02d}_{name}.jsonl','w').write(''.join(l+'\n' for l in lines))
for n,(name,lines,exp) in enumerate(I,1):
    open(f'{base}/invalid/{n:02d}_{name}.jsonl','w').write(''.join(l+'\n' for l in lines))
    open(f'{base}/invalid/{n:02d}_{name}.expect','w').write(exp+'\n')
# invalid utf-8
n=len(I)+1
open(f'{base}/invalid/{n:02d}_invalid_utf8.jsonl','wb').write((h+'\n').encode()+b'{"session_id":"s1","type":"token","text":"\xff\xfe"}\n'+(md("")+'\n'+done("stop")+'\n').encode())
open(f'{base}/invalid/{n:02d}_invalid_utf8.expect','w').write('2: not valid UTF-8\n')
print(len(valid), len(I)+1)
