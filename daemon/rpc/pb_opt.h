/* pb_opt.h - proto3 `optional` scalars as protobuf-c spells them.
 *
 * protobuf-c gives each optional field <field> of message <Message> a
 * one-field oneof: presence is <field>_opt_case, whose set value is
 * REPLAYD__V1__<MESSAGE>__<FIELD>_OPT_<FIELD>. These spell that once; MSG
 * and FIELD are the upper-case parts of the constant, field the member.
 */
#ifndef RD_PB_OPT_H
#define RD_PB_OPT_H

#define RD_PB_OPT_CASE(MSG, FIELD) REPLAYD__V1__##MSG##__##FIELD##_OPT_##FIELD

/* Whether pb's optional field is present. */
#define RD_PB_HAS(pb, MSG, FIELD, field) ((pb)->field##_opt_case == RD_PB_OPT_CASE(MSG, FIELD))

/* dst->has_<field> and dst-><field> from pb's optional field. */
#define RD_PB_GET_OPT(dst, pb, MSG, FIELD, field) \
  ((dst)->has_##field = RD_PB_HAS(pb, MSG, FIELD, field), (dst)->field = (pb)->field)

/* pb's optional field present, with value v. */
#define RD_PB_SET_OPT(pb, MSG, FIELD, field, v) \
  ((pb)->field##_opt_case = RD_PB_OPT_CASE(MSG, FIELD), (pb)->field = (v))

#endif
