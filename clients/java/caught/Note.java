package caught;

import javax.persistence.Entity;
import javax.persistence.GeneratedValue;
import javax.persistence.GenerationType;
import javax.persistence.Id;
import javax.persistence.Table;

/** A bigserial table beside the next_id ones: its INSERT moves lastval(). */
@Entity
@Table(name = "el_note")
public class Note {
    @Id
    @GeneratedValue(strategy = GenerationType.IDENTITY)
    private Long id;

    private String body;

    protected Note() {}

    public Note(String body) { this.body = body; }

    public Long getId() { return id; }
}
